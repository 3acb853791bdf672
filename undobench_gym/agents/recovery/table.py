"""The verdict of every recovery method on the lost-acknowledgement workflows, as a table.

`python -m undobench_gym.agents.recovery.table [--seeds 1-3] [--json]` runs the scripted
gold-plan agent in paired trials (real stacks on the process runtime, one per domain and
server-idempotency mode) and prints, per scenario and method, what the fault episodes did:
success, duplicate and missing effects, the three effect layers, re-issues after commit,
and whether every pair was prefix-equivalent. `--derivations` prints, without running
anything, the verifiers, compensations and resumptions derived for every workflow. docs/methods.md
pastes both outputs.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from typing import Any

from undobench_gym.agents.methods import (
    METHODS,
    applicable_methods,
    capabilities,
    server_idempotency_for,
    workflow_schemas,
    workflow_spec,
    workflow_specs,
    wrap,
)
from undobench_gym.agents.scripted import ScriptedAgent
from undobench_gym.core.env import UndoBenchEnv
from undobench_gym.core.pairing import run_pair

SCENARIOS = (
    "pay-charge-customer:lost-ack",
    "pay-charge-customer:ambiguous",
    "pay-renew-subscription:lost-ack",
    "pay-renew-subscription:pre-reset",
    "db-transfer-funds:credit-lost-ack",
    "db-upgrade-tier:bonus-lost-ack",
    "msg-oncall-sms:chat-lost-ack",
    "pay-split-payout:crash-mid-batch",
    "pay-charge-customer:worker-crash",
)
COLUMNS = (
    "success",
    "duplicates",
    "missing",
    "unrequired",
    "physical",
    "committed",
    "semantic",
    "reissued",
)


def measure(
    scenarios: Iterable[str] = SCENARIOS,
    methods: Iterable[str] = METHODS,
    seeds: Iterable[int] = (1,),
) -> list[dict[str, Any]]:
    """One row per (scenario, method): fault-episode counts summed over the seeds."""
    envs: dict[tuple[str, str], UndoBenchEnv] = {}
    rows = []
    try:
        for item in scenarios:
            wf_id, _, sc_id = item.partition(":")
            workflow = workflow_spec(wf_id)
            scenario = workflow.scenario(sc_id)
            for method in methods:
                key = (workflow.domain, server_idempotency_for(method))
                if key not in envs:
                    envs[key] = UndoBenchEnv(workflow.domain, server_idempotency=key[1])
                row: dict[str, Any] = {"scenario": item, "method": method, "pairs": 0}
                row.update({c: 0 for c in COLUMNS})
                row["prefix_equivalent"] = True
                for seed in seeds:
                    pair = run_pair(
                        wrap(envs[key], method),
                        ScriptedAgent(),
                        workflow=workflow,
                        scenario=scenario,
                        seed=seed,
                        method=method,
                        runtime="process",
                    )
                    fault = pair["fault"]
                    effects = fault["effects"]
                    row["pairs"] += 1
                    row["success"] += int(fault["success"])
                    row["reissued"] += effects["reissued_after_commit"]
                    row["unrequired"] += len(fault["verdict"].get("unrequired", []))
                    for col in ("duplicates", "missing", "physical", "committed", "semantic"):
                        row[col] += effects[col]
                    row["prefix_equivalent"] &= pair["prefix_equivalent"]
                rows.append(row)
    finally:
        for env in envs.values():
            env.close()
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    head = ["scenario", "method", "pairs", *COLUMNS, "prefix-eq"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["scenario"], r["method"], r["pairs"], *(r[c] for c in COLUMNS)]
        cells.append("yes" if r["prefix_equivalent"] else "NO")
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def derivations() -> str:
    """Per workflow: the applicable methods and what the rules derive (no stack needed)."""
    lines = [
        "| workflow | applicable methods | verifiers (B5-P, B6) | resumptions (B5-P, B6) "
        "| compensations (B3) |",
        "|---|---|---|---|---|",
    ]
    for workflow in workflow_specs():
        caps = capabilities(workflow_schemas(workflow))
        probes = "<br>".join(f"`{m}` → {', '.join(v)}" for m, v in caps["probes"].items())
        comps = "<br>".join(f"`{f}` → `{c}`" for f, c in caps["compensations"].items())
        resumes = "<br>".join(f"`{f}` → `{r}`" for f, r in caps["resumptions"].items())
        methods = ", ".join(applicable_methods(workflow))
        cells = (probes, resumes, comps)
        lines.append(f"| {workflow.id} | {methods} | {' | '.join(c or '—' for c in cells)} |")
    return "\n".join(lines)


def parse_seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--seeds", default="1", help="a seed or a range, e.g. 1-3 (default 1)")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS), help="WORKFLOW:SCENARIO,...")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    ap.add_argument(
        "--derivations", action="store_true", help="print what the rules derive, run nothing"
    )
    args = ap.parse_args(argv)
    if args.derivations:
        print(derivations())
        return
    rows = measure(
        [s for s in args.scenarios.split(",") if s],
        [m for m in args.methods.split(",") if m],
        parse_seeds(args.seeds),
    )
    print(json.dumps(rows, indent=2) if args.json else markdown(rows))


if __name__ == "__main__":
    main()
