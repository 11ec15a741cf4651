//! The view under both methods: a fork sees the lower, writes only its upper, and a freeze
//! carries the session on over its frozen layer.

use std::fs;

use super::*;

fn method() -> ViewMethod {
    let scratch = tempfile::tempdir().unwrap();
    ViewMethod::probe(scratch.path())
}

fn spec(dir: &Path, name: &str, lowers: Vec<PathBuf>) -> ViewSpec {
    ViewSpec {
        lowers,
        private_dir: dir.join("views").join(name),
        root: dir.join("workspaces").join(name),
    }
}

fn forks_share_the_lower_and_keep_their_writes(method: ViewMethod) {
    let dir = tempfile::tempdir().unwrap();
    let lower = dir.path().join("layer");
    fs::create_dir_all(lower.join("src")).unwrap();
    fs::write(lower.join("src/a.txt"), "base").unwrap();
    let views: Vec<MountedView> = (0..3)
        .map(|i| {
            MountedView::mount(
                spec(dir.path(), &format!("s{i}"), vec![lower.clone()]),
                method,
            )
            .unwrap()
        })
        .collect();
    for (i, view) in views.iter().enumerate() {
        assert_eq!(
            fs::read_to_string(view.root().join("src/a.txt")).unwrap(),
            "base"
        );
        fs::write(view.root().join("src/a.txt"), format!("fork {i}")).unwrap();
    }
    for (i, view) in views.iter().enumerate() {
        assert_eq!(
            fs::read_to_string(view.root().join("src/a.txt")).unwrap(),
            format!("fork {i}")
        );
        assert_eq!(view.copy_kind(), method.copy_kind());
        view.unmount().unwrap();
    }
    assert_eq!(fs::read_to_string(lower.join("src/a.txt")).unwrap(), "base");
}

fn a_freeze_keeps_the_content_and_the_session_goes_on(method: ViewMethod) {
    let dir = tempfile::tempdir().unwrap();
    let mut view = MountedView::mount(spec(dir.path(), "s", vec![]), method).unwrap();
    fs::write(view.root().join("a.txt"), "one").unwrap();
    let first = view.freeze(&dir.path().join("snap1"), true).unwrap();
    fs::write(view.root().join("a.txt"), "two").unwrap();
    fs::write(view.root().join("b.txt"), "new").unwrap();
    let second = view.freeze(&dir.path().join("snap2"), true).unwrap();
    fs::remove_file(view.root().join("b.txt")).unwrap();
    assert!(!view.root().join("b.txt").exists());
    let from_first =
        MountedView::mount(spec(dir.path(), "f1", first.layers.clone()), method).unwrap();
    let from_second =
        MountedView::mount(spec(dir.path(), "f2", second.layers.clone()), method).unwrap();
    assert_eq!(
        fs::read_to_string(from_first.root().join("a.txt")).unwrap(),
        "one"
    );
    assert!(!from_first.root().join("b.txt").exists());
    assert_eq!(
        fs::read_to_string(from_second.root().join("a.txt")).unwrap(),
        "two"
    );
    assert_eq!(
        fs::read_to_string(from_second.root().join("b.txt")).unwrap(),
        "new"
    );
    if method == ViewMethod::Overlay {
        assert_eq!(first.copy, CopyKind::Cow);
        assert_eq!(second.layers.len(), 2);
    }
    for view in [&view, &from_first, &from_second] {
        view.unmount().unwrap();
    }
}

#[test]
fn overlay_or_copy_as_the_machine_allows() {
    let method = method();
    eprintln!("view method on this machine: {method:?}");
    forks_share_the_lower_and_keep_their_writes(method);
    a_freeze_keeps_the_content_and_the_session_goes_on(method);
}

#[test]
fn full_copies_behave_alike() {
    forks_share_the_lower_and_keep_their_writes(ViewMethod::FullCopy);
    a_freeze_keeps_the_content_and_the_session_goes_on(ViewMethod::FullCopy);
}

#[test]
fn a_remount_after_a_crash_keeps_the_upper() {
    let method = method();
    let dir = tempfile::tempdir().unwrap();
    let lower = dir.path().join("layer");
    fs::create_dir_all(&lower).unwrap();
    let view = MountedView::mount(spec(dir.path(), "s", vec![lower.clone()]), method).unwrap();
    fs::write(view.root().join("mine.txt"), "kept").unwrap();
    // A crashed daemon never unmounted: the next one mounts over the stale mount.
    let again = MountedView::mount(spec(dir.path(), "s", vec![lower]), method).unwrap();
    assert_eq!(
        fs::read_to_string(again.root().join("mine.txt")).unwrap(),
        "kept"
    );
    again.unmount().unwrap();
    drop(view);
}
