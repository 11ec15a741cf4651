#!/usr/bin/env bash
# Every path ARCHITECTURE.md names must exist: a map that points at nothing misleads the
# newcomer it is written for. Extracts each `src/…`, `tests/…`, `docs/…`, `benches/…`,
# `migrations/…`, `proto/…`, `config/…` and `deploy/…` path from the file (a path ends at the
# first character that cannot be part of one, so `tests/it/<area>/` is checked as `tests/it/`)
# and fails listing those that do not exist, relative to the repository root.
#
# Usage: docs/check_architecture_paths.sh [FILE]   (default: ARCHITECTURE.md)
set -euo pipefail
cd "$(dirname "$0")/.."

file="${1:-ARCHITECTURE.md}"
if [[ ! -f "$file" ]]; then
    echo "check_architecture_paths: no file \"$file\"" >&2
    exit 2
fi

# A path starts at a word boundary (not inside `../shared/…` or `a/src/…`) with one of the
# roots, and runs over the characters file names here use.
paths=$(grep -oE '(^|[^A-Za-z0-9_./-])(src|tests|docs|benches|migrations|proto|config|deploy)/[A-Za-z0-9_./-]*' "$file" \
    | sed -E 's/^[^A-Za-z]//; s/[.]+$//' \
    | sort -u)

missing=0
checked=0
while IFS= read -r path; do
    [[ -z "$path" ]] && continue
    checked=$((checked + 1))
    if [[ ! -e "$path" ]]; then
        echo "missing: $path" >&2
        missing=$((missing + 1))
    fi
done <<< "$paths"

if [[ $missing -gt 0 ]]; then
    echo "check_architecture_paths: $missing of $checked paths named in $file do not exist" >&2
    exit 1
fi
echo "check_architecture_paths: all $checked paths named in $file exist"
