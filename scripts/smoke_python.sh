#!/usr/bin/env bash
# The smoke subset on one Python: scripts/smoke_python.sh 3.12 (or 3.13, 3.11).
#
# Takes the interpreter from this machine (pyenv's newest 3.X.Y, else python3.X on PATH:
# nothing is downloaded but packages from the registry), makes a venv for it
# (build/smoke-py3.X, kept: a second run only re-checks the install), installs the project's
# built wheel (not the source tree) with the eval, llm, mcp and dev extras at the versions
# in constraints/py3.X.txt, and runs:
#   1. pip check, and the versions that resolved (mitmproxy, mcp, openai, h11, uvloop);
#   2. a paired sweep over every domain with the scripted agent (the first TEST workflow of
#      each, every scenario, bare and B2, seed 1), from the installed wheel in a directory
#      outside the source tree: 0 infrastructure errors and a report;
#   3. both LLM frameworks (F1, F2) against the fake OpenAI server, directly and through an
#      MCP client session, with the same verdicts and model requests either way;
#   4. the MCP round trip with the SDK's own client over stdio and streamable HTTP
#      (tools with their hints, a faulted call, finish, the verdict), and the default
#      episode a desktop client sees;
#   5. the service and the fault proxy on uvloop (and on asyncio's loop without it).
# The tests of steps 3-5 import the source tree's modules, so before them the project is
# installed from the source tree (editable, no dependency changes). SMOKE_TESTS=0 stops
# after the sweep (CI on the Python whose full suite it runs). SMOKE_STAGE=install stops after
# the install, SMOKE_STAGE=check skips it (the venv must be there): scripts/smoke_pythons.sh
# installs every Python at once (pip waits on the registry and the disk, not on a core),
# then checks them one at a time. SMOKE_WHEEL=PATH installs that wheel instead of building.
# Each step's time is printed; the script stops at the first failure.
set -euo pipefail

want="${1:?usage: scripts/smoke_python.sh 3.X}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

find_python() {
    local v="$1" found=""
    if [ -d "${PYENV_ROOT:-$HOME/.pyenv}/versions" ]; then
        found="$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}/versions/$v".* 2>/dev/null | sort -V | tail -n 1)"
        [ -n "$found" ] && [ -x "$found/bin/python" ] && { echo "$found/bin/python"; return; }
    fi
    command -v "python$v" 2>/dev/null && return
    return 1
}

python="$(find_python "$want")" || {
    echo "no Python $want on this machine (pyenv or python$want on PATH)" >&2
    exit 2
}
venv="${SMOKE_VENV:-$root/build/smoke-py$want}"
out="$(realpath -m "${SMOKE_OUT:-$root/build/smoke-py$want-run}")"
# One TEST workflow per domain (the catalogue's first), every scenario of each.
workflows="${SMOKE_WORKFLOWS:-pay-split-payout,db-pay-dividend,st-publish-build-artifact,git-cut-release,cloud-blue-green-cutover,crm-close-won-deal,tix-escalate-incident,msg-page-oncall}"

t0=$SECONDS
step() { printf '\n== %s (%ds so far)\n' "$1" $((SECONDS - t0)); }
took() { printf -- '-- %s: %ds\n' "$1" $((SECONDS - $2)); }

# The build's own output goes to a log, shown if the build fails.
quietly() { "$@" 2>"$venv/build.log" || { cat "$venv/build.log"; return 1; }; }
stage="${SMOKE_STAGE:-all}"
case "$stage" in all | install | check) ;; *) echo "SMOKE_STAGE is all, install or check, not $stage" >&2; exit 2 ;; esac
step "Python $want: $python"
if [ "$stage" = check ]; then
    [ -x "$venv/bin/undobench" ] || { echo "SMOKE_STAGE=check: no installed venv at $venv" >&2; exit 2; }
else
s=$SECONDS
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
pin=()
[ -f "$root/constraints/py$want.txt" ] && pin=(-c "$root/constraints/py$want.txt")
dist="$venv/dist"
rm -rf "$dist"
if [ -n "${SMOKE_WHEEL:-}" ]; then
    wheel="$(realpath "$SMOKE_WHEEL")"
else
    quietly "$venv/bin/python" -m pip wheel --quiet --no-deps -w "$dist" "$root"
    wheel="$(ls "$dist"/undobench_gym-*.whl)"
fi
# --no-compile: modules are byte-compiled when first imported, and a smoke imports a
# fraction of what it installs (compiling all of it is most of an install's CPU time)
"$venv/bin/python" -m pip install --quiet --no-compile --force-reinstall --no-deps "$wheel"
"$venv/bin/python" -m pip install --quiet --no-compile "${pin[@]}" "$wheel[eval,llm,mcp,dev]"
took "venv, wheel and install" "$s"
if [ "$stage" = install ]; then
    printf '\nsmoke install on Python %s done in %ds\n' "$want" $((SECONDS - t0))
    exit 0
fi
fi

step "pip check and the versions that resolved"
"$venv/bin/python" -m pip check
"$venv/bin/python" - <<'EOF'
import sys
from importlib.metadata import PackageNotFoundError, version

names = ["mitmproxy", "mcp", "openai", "h11", "httpx", "uvloop", "uvicorn", "fastapi"]
found = []
for name in names:
    try:
        found.append(f"{name} {version(name)}")
    except PackageNotFoundError:
        found.append(f"{name} -")
print(f"Python {sys.version.split()[0]}: " + ", ".join(found))
EOF

step "paired sweep over every domain (scripted agent, bare and B2, seed 1)"
s=$SECONDS
rm -rf "$out"
mkdir -p "$out.cwd"
# From outside the source tree, so that nothing but the installed wheel can be imported.
(cd "$out.cwd" && "$venv/bin/python" -c 'import undobench_gym, sys; assert "site-packages" in undobench_gym.__file__, undobench_gym.__file__' \
    && "$venv/bin/undobench" run --workflows "$workflows" --method bare,B2 --seeds 1 --out "$out" --quiet)
"$venv/bin/python" - "$out" <<'EOF'
import json
import sys
from pathlib import Path

out = Path(sys.argv[1])
pairs = [json.loads(line) for line in (out / "trials.jsonl").read_text().splitlines() if line]
domains = sorted({p["domain"] for p in pairs})
infra = [p["pair_id"] for p in pairs if p.get("infra_errors")]
counts = json.loads((out / "run_meta.json").read_text())["counts"]
planned = json.loads((out / "run_meta.json").read_text())["sessions"][-1]["planned_pairs"]
assert (out / "report.md").stat().st_size > 0, "no report.md"
assert len(pairs) == planned, f"{len(pairs)} pairs recorded of {planned}"
assert not infra and counts["infra_error_pairs"] == 0, f"infrastructure errors: {infra}"
print(f"{len(pairs)} pairs over {len(domains)} domains ({', '.join(domains)}), "
      f"0 infrastructure errors (failed attempts: {counts['failed_attempts_by_kind'] or 0}), "
      "report.md written")
EOF
took "sweep" "$s"

if [ "${SMOKE_TESTS:-1}" = 0 ]; then
    printf '\nsmoke (wheel and sweep) on Python %s passed in %ds\n' "$want" $((SECONDS - t0))
    exit 0
fi

step "F1 and F2 against the fake server, direct and through MCP; the MCP round trip; uvloop"
s=$SECONDS
quietly "$venv/bin/python" -m pip install --quiet --no-deps -e "$root"
"$venv/bin/python" -m pytest -q -p no:cacheprovider \
    "tests/mcp/test_mcp_tools.py::test_same_verdicts_as_the_direct_path" \
    tests/mcp/test_server.py \
    tests/runtime/test_event_loop.py
took "tests" "$s"

printf '\nsmoke on Python %s passed in %ds\n' "$want" $((SECONDS - t0))
