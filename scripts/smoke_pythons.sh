#!/usr/bin/env bash
# The smoke subset on every supported Python (make smoke-pythons; CI): the wheel is built
# once, the three venvs install it at the same time (pip waits on the registry and the
# disk, so three installs take about as long as one), then each Python's checks run one
# after another (they use the cores). 3.11's full suite runs elsewhere, so its smoke stops
# after the sweep (SMOKE_TESTS=0). Usage: scripts/smoke_pythons.sh [3.11 3.12 3.13]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
versions=("${@:-3.11}")
[ $# -gt 0 ] || versions=(3.11 3.12 3.13)

t0=$SECONDS
dist="$root/build/smoke-dist"
rm -rf "$dist"
mkdir -p "$dist"
python3 -m pip wheel --quiet --no-deps -w "$dist" "$root" >"$dist/build.log" 2>&1 \
    || { cat "$dist/build.log"; exit 1; }
wheel="$(ls "$dist"/undobench_gym-*.whl)"
echo "built $(basename "$wheel") in $((SECONDS - t0))s; installing on ${versions[*]} at once"

pids=()
for v in "${versions[@]}"; do
    SMOKE_STAGE=install SMOKE_WHEEL="$wheel" scripts/smoke_python.sh "$v" \
        >"$root/build/smoke-install-py$v.log" 2>&1 &
    pids+=($!)
done
failed=0
for i in "${!versions[@]}"; do
    if ! wait "${pids[$i]}"; then
        echo "install on Python ${versions[$i]} failed:" >&2
        cat "$root/build/smoke-install-py${versions[$i]}.log" >&2
        failed=1
    fi
done
[ "$failed" = 0 ] || exit 1
echo "installed on ${versions[*]} in $((SECONDS - t0))s"

for v in "${versions[@]}"; do
    tests=1
    [ "$v" = 3.11 ] && tests=0
    SMOKE_STAGE=check SMOKE_TESTS=$tests scripts/smoke_python.sh "$v"
done
echo "smoke on ${versions[*]}: $((SECONDS - t0))s in all"
