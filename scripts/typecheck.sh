#!/usr/bin/env bash
# mypy (strict) over the library as it is installed: the top-level folders envs/, proxies/,
# agents/ and evaluation/ are mapped into undobench_gym.* by setuptools package-dir, which
# mypy cannot follow from the source tree. So lay the installed shape out with symlinks.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tree="$root/build/typecheck"
rm -rf "$tree"
mkdir -p "$tree"
ln -s "$root/undobench_gym" "$tree/undobench_gym_core"
mkdir "$tree/undobench_gym"
for f in "$root"/undobench_gym/*; do ln -s "$f" "$tree/undobench_gym/$(basename "$f")"; done
for d in envs proxies agents evaluation; do ln -s "$root/$d" "$tree/undobench_gym/$d"; done
rm "$tree/undobench_gym_core"
cd "$tree"
exec "${MYPY:-$root/.venv/bin/mypy}" --config-file "$root/pyproject.toml" -p undobench_gym "$@"
