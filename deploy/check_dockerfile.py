#!/usr/bin/env python3
"""Checks that the Dockerfile's build stage copies everything the build needs, without Docker.

It reads the first stage of the Dockerfile (up to the next FROM), copies exactly what its COPY
lines copy from the repository into an empty directory laid out as the stage's WORKDIR, and runs
the stage's `cargo build` there as a `cargo check` (same package selection, no --release) with the
repository's target directory, so dependencies already built are reused and only toold itself
is checked. A path the build needs and the Dockerfile omits (build.rs, proto/, a migration
directory, a bench a manifest names) fails the check as it would fail `docker build`.

`--omit PATH --expect-failure` drops the COPY lines whose sources name PATH and expects the
check to fail: .ci/run runs it once to show the check can fail.

Not modelled: ARG/ENV substitution, globs, `COPY --from`, `ADD`; the script refuses a stage that
uses them rather than checking it wrongly.
"""

import argparse
import os
import posixpath
import shlex
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fail(message):
    print(f"check_dockerfile: {message}", file=sys.stderr)
    sys.exit(1)


def instructions(text):
    """The Dockerfile's instructions as (keyword, rest), continuation lines joined."""
    joined, pending = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = (pending + stripped).strip()
        pending = ""
        keyword, _, rest = full.partition(" ")
        joined.append((keyword.upper(), rest.strip()))
    return joined


def build_stage(text):
    """WORKDIR, [(sources, dest)] and the cargo command of the first stage."""
    workdir, copies, cargo = "/", [], None
    seen_from = False
    for keyword, rest in instructions(text):
        if keyword == "FROM":
            if seen_from:
                break
            seen_from = True
            continue
        if keyword == "WORKDIR":
            workdir = posixpath.join(workdir, rest)
        elif keyword in ("ADD", "ARG") or (keyword == "COPY" and "--from" in rest):
            fail(f"the build stage uses `{keyword} {rest}`, which this check does not model")
        elif keyword == "COPY":
            words = [w for w in shlex.split(rest) if not w.startswith("--")]
            if len(words) < 2:
                fail(f"cannot read `COPY {rest}`")
            if any(ch in w for w in words[:-1] for ch in "*?["):
                fail(f"`COPY {rest}` uses a glob, which this check does not model")
            copies.append((words[:-1], words[-1]))
        elif keyword == "RUN" and "cargo build" in rest:
            cargo = shlex.split(rest)
    if cargo is None:
        fail("the build stage has no `RUN cargo build`")
    return workdir, copies, cargo


def lay_out(root, workdir, copies):
    for sources, dest in copies:
        target = posixpath.join(workdir, dest)
        into_dir = dest.endswith("/") or len(sources) > 1
        for source in sources:
            origin = os.path.join(ROOT, source)
            if not os.path.exists(origin):
                fail(f"COPY names {source}, which the repository does not have")
            place = posixpath.join(target, posixpath.basename(source.rstrip("/"))) if into_dir else target
            place = os.path.join(root, place.lstrip("/"))
            if os.path.isdir(origin):
                shutil.copytree(origin, place, dirs_exist_ok=True)
            else:
                os.makedirs(os.path.dirname(place), exist_ok=True)
                shutil.copy2(origin, place)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dockerfile", default=os.path.join(ROOT, "Dockerfile"))
    parser.add_argument("--omit", help="drop the COPY lines whose sources name this path")
    parser.add_argument("--expect-failure", action="store_true")
    args = parser.parse_args()

    with open(args.dockerfile) as f:
        workdir, copies, cargo = build_stage(f.read())
    if args.omit:
        kept = [(s, d) for s, d in copies if args.omit.rstrip("/") not in [x.rstrip("/") for x in s]]
        if len(kept) == len(copies):
            fail(f"no COPY line copies {args.omit}")
        copies = kept
    # `cargo build …` → `cargo check …` on the dev profile, sharing the repository's target.
    command = ["cargo", "check"] + [w for w in cargo[2:] if w != "--release"]
    target_dir = os.path.abspath(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")))
    with tempfile.TemporaryDirectory(prefix="toold-docker-context-") as root:
        lay_out(root, workdir, copies)
        cwd = os.path.join(root, workdir.lstrip("/"))
        env = dict(os.environ, CARGO_TARGET_DIR=target_dir)
        result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    built = result.returncode == 0
    if built == args.expect_failure:
        sys.stderr.write(result.stderr[-4000:])
        what = "built although" if built else "did not build:"
        fail(f"{what} {' '.join(command)} from the Dockerfile's build stage"
             + (f" without {args.omit}" if args.omit else ""))
    outcome = "fails, as expected," if args.expect_failure else "builds"
    print(f"check_dockerfile: the build stage {outcome} from what it copies"
          + (f" (without {args.omit})" if args.omit else ""))


if __name__ == "__main__":
    main()
