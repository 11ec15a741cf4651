//! One file in and out: a streamed PUT written atomically (a temporary file beside the target,
//! renamed over it), and the `Range` header read for a GET.
//!
//! A PUT never holds the body: it is copied chunk by chunk into the temporary file, refused
//! (and the temporary file removed) once it passes the size limit. The file's mode is the one
//! asked for, else the replaced file's, else 0644.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::transfer_tools::UploadBody;

/// The chunk a transfer reads and writes at a time.
pub const CHUNK: usize = 256 << 10;

#[derive(Debug, thiserror::Error)]
pub enum PutError {
    #[error("the file is larger than {0} bytes")]
    TooLarge(u64),
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Io(String),
}

/// Writes `body` to `target` (parents created); the bytes written.
pub async fn put_file(
    mut body: UploadBody,
    target: &Path,
    mode: Option<u32>,
    max: u64,
) -> Result<u64, PutError> {
    let existing = tokio::fs::symlink_metadata(target).await.ok();
    if existing.as_ref().is_some_and(|m| m.is_dir()) {
        return Err(PutError::Refused(format!(
            "\"{}\" is a directory",
            target.display()
        )));
    }
    let parent = target.parent().ok_or_else(|| {
        PutError::Refused(format!("\"{}\" has no parent directory", target.display()))
    })?;
    let io_err = |what: &str, err: io::Error| {
        PutError::Io(format!("{what} \"{}\": {err}", target.display()))
    };
    tokio::fs::create_dir_all(parent)
        .await
        .map_err(|e| io_err("creating the parents of", e))?;
    let temp = parent.join(format!(".toold-put-{}", uuid::Uuid::now_v7().simple()));
    let written = copy_limited(&mut body, &temp, max).await;
    let bytes = match written {
        Ok(bytes) => bytes,
        Err(err) => {
            let _ = tokio::fs::remove_file(&temp).await;
            return Err(err);
        }
    };
    let mode = mode.unwrap_or_else(|| {
        existing
            .filter(|m| m.is_file())
            .map_or(0o644, |m| m.permissions().mode() & 0o7777)
    });
    let finish = async {
        tokio::fs::set_permissions(&temp, std::fs::Permissions::from_mode(mode)).await?;
        tokio::fs::rename(&temp, target).await
    };
    if let Err(err) = finish.await {
        let _ = tokio::fs::remove_file(&temp).await;
        return Err(io_err("writing", err));
    }
    Ok(bytes)
}

async fn copy_limited(body: &mut UploadBody, temp: &Path, max: u64) -> Result<u64, PutError> {
    let io_err = |err: io::Error| PutError::Io(format!("writing \"{}\": {err}", temp.display()));
    let mut out = tokio::fs::File::create(temp).await.map_err(io_err)?;
    let mut buf = vec![0u8; CHUNK];
    let mut total = 0u64;
    loop {
        let n = body
            .read(&mut buf)
            .await
            .map_err(|err| PutError::Io(format!("reading the upload: {err}")))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > max {
            return Err(PutError::TooLarge(max));
        }
        out.write_all(&buf[..n]).await.map_err(io_err)?;
    }
    out.flush().await.map_err(io_err)?;
    Ok(total)
}

/// What a GET sends, given its `Range` header and the file's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeAnswer {
    /// No range, or one this reads as none (several ranges, bad syntax): the whole file (200).
    Whole,
    /// Bytes `start..=end` (206).
    Part { start: u64, end: u64 },
    /// A range that starts past the end (416).
    Unsatisfiable,
}

/// Reads a `Range` header: one `bytes=a-b`, `bytes=a-` or `bytes=-n` range; anything else is
/// ignored (RFC 9110 lets a server send the whole representation instead).
pub fn range_answer(header: Option<&str>, size: u64) -> RangeAnswer {
    let Some(spec) = header.and_then(|h| h.trim().strip_prefix("bytes=")) else {
        return RangeAnswer::Whole;
    };
    if spec.contains(',') {
        return RangeAnswer::Whole;
    }
    let Some((first, last)) = spec.split_once('-') else {
        return RangeAnswer::Whole;
    };
    let (first, last) = (first.trim(), last.trim());
    let number = |text: &str| text.parse::<u64>().ok();
    match (first.is_empty(), last.is_empty()) {
        (true, false) => match number(last) {
            Some(0) => RangeAnswer::Unsatisfiable,
            Some(n) if size > 0 => RangeAnswer::Part {
                start: size.saturating_sub(n),
                end: size - 1,
            },
            Some(_) => RangeAnswer::Unsatisfiable,
            None => RangeAnswer::Whole,
        },
        (false, _) => {
            let Some(start) = number(first) else {
                return RangeAnswer::Whole;
            };
            let end = if last.is_empty() {
                Some(u64::MAX)
            } else {
                number(last)
            };
            match end {
                None => RangeAnswer::Whole,
                Some(end) if end < start => RangeAnswer::Whole,
                Some(_) if start >= size => RangeAnswer::Unsatisfiable,
                Some(end) => RangeAnswer::Part {
                    start,
                    end: end.min(size - 1),
                },
            }
        }
        (true, true) => RangeAnswer::Whole,
    }
}

#[cfg(test)]
mod tests {
    use super::RangeAnswer::*;
    use super::*;

    #[test]
    fn ranges_read_as_rfc_9110_says() {
        let cases = [
            (None, Whole),
            (Some("bytes=0-9"), Part { start: 0, end: 9 }),
            (Some("bytes=90-"), Part { start: 90, end: 99 }),
            (Some("bytes=-10"), Part { start: 90, end: 99 }),
            (Some("bytes=-500"), Part { start: 0, end: 99 }),
            (Some("bytes=50-5000"), Part { start: 50, end: 99 }),
            (Some("bytes=100-"), Unsatisfiable),
            (Some("bytes=-0"), Unsatisfiable),
            (Some("bytes=0-1,5-6"), Whole),
            (Some("bytes=9-1"), Whole),
            (Some("bytes=x-1"), Whole),
            (Some("items=0-1"), Whole),
        ];
        for (header, answer) in cases {
            assert_eq!(range_answer(header, 100), answer, "{header:?}");
        }
    }
}
