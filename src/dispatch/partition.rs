//! Partition-then-gather: consecutive concurrency-safe calls form one parallel group; every
//! other call is a group of its own. Safe groups on either side of an unsafe call are never
//! merged. The streaming executor applies the same rule ([`joins_previous_group`]) as calls
//! arrive; this pure form states it over a whole batch.

use std::ops::Range;

/// A run of calls that execute together: in parallel when `safe`, otherwise one call alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallGroup {
    pub safe: bool,
    pub calls: Range<usize>,
}

/// The one grouping rule, shared with the streaming executor: a call joins the group before
/// it only when both are concurrency-safe.
pub fn joins_previous_group(previous_safe: Option<bool>, safe: bool) -> bool {
    safe && previous_safe == Some(true)
}

/// Groups calls by their concurrency-safety, in request order.
pub fn partition(safe: &[bool]) -> Vec<CallGroup> {
    let mut groups: Vec<CallGroup> = Vec::new();
    for (index, &is_safe) in safe.iter().enumerate() {
        let previous_safe = groups.last().map(|group| group.safe);
        match groups.last_mut() {
            Some(group) if joins_previous_group(previous_safe, is_safe) => {
                group.calls.end = index + 1
            }
            _ => groups.push(CallGroup {
                safe: is_safe,
                calls: index..index + 1,
            }),
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(safe: &[bool]) -> Vec<(bool, Range<usize>)> {
        partition(safe)
            .into_iter()
            .map(|g| (g.safe, g.calls))
            .collect()
    }

    #[test]
    fn reads_around_a_write_are_never_merged() {
        // [R, R, W, R, R] → [R,R] [W] [R,R]
        assert_eq!(
            shape(&[true, true, false, true, true]),
            vec![(true, 0..2), (false, 2..3), (true, 3..5)]
        );
    }

    #[test]
    fn table() {
        type Case = (&'static [bool], Vec<(bool, Range<usize>)>);
        let cases: &[Case] = &[
            (&[], vec![]),
            (&[true], vec![(true, 0..1)]),
            (&[false, false], vec![(false, 0..1), (false, 1..2)]),
            (&[true, true, true], vec![(true, 0..3)]),
            (&[false, true, true], vec![(false, 0..1), (true, 1..3)]),
            (&[true, false], vec![(true, 0..1), (false, 1..2)]),
        ];
        for (input, expected) in cases {
            assert_eq!(&shape(input), expected, "{input:?}");
        }
    }
}
