#!/usr/bin/env bash
# mypy (strict) over the library, from the source tree: the package's folders are its
# sub-packages, so mypy follows them as they are.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
exec "${MYPY:-$root/.venv/bin/mypy}" --config-file "$root/pyproject.toml" -p undobench_gym "$@"
