"""`undobench run`: run paired control/fault trials from flags or a sweep file."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from undobench_gym.agents import methods
from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.core.extras import missing
from undobench_gym.harness.cli.summary import print_summary

#: The flags that give the factorial; a sweep file gives it instead.
FACTORIAL = (
    "workflows",
    "split",
    "scenarios",
    "boundaries",
    "method",
    "seeds",
    "agent",
    "framework",
    "runtime",
    "max_steps",
)


def add(sub: Any) -> None:
    r = sub.add_parser(
        "run",
        help="run paired control/fault trials",
        description="Run paired control/fault trials: give the factorial with flags or in "
        "a sweep file (--sweep), and run it in this process, in --workers N local worker "
        "processes, or on Ray (--executor ray).",
    )
    r.add_argument("--sweep", metavar="FILE", help="sweep file (.toml/.yaml): the factorial")
    r.add_argument("--workflows", help="comma-separated workflow ids")
    r.add_argument("--split", choices=["dev", "val", "test", "stress"])
    r.add_argument("--scenarios", help="comma-separated scenario ids (default: all)")
    r.add_argument(
        "--boundaries",
        help="comma-separated fault boundaries, e.g. POST_MUTATION_PRE_ACK,PRE_MUTATION: keep "
        "each workflow's scenarios at these (scenario ids differ between workflows)",
    )
    r.add_argument(
        "--method",
        default=None,
        help=", ".join(methods.METHODS) + " (comma-separated for several; default bare)",
    )
    r.add_argument("--seeds", default=None, help="e.g. 1-20 or 1,2,5 (default 1-5)")
    r.add_argument(
        "--agent",
        default=None,
        help="scripted (default) | openai:MODEL@URL | local:MODEL (qwen2.5-coder-1.5b, "
        "smollm2, gemma3-270m; see `undobench models`) | hf:PATH | vllm:MODEL | "
        "python:MODULE:CLASS (see docs/agents.md)",
    )
    r.add_argument("--framework", default=None, help="agent framework label (F1|F2)")
    r.add_argument(
        "--tool-choice",
        choices=["auto", "required"],
        default=None,
        help="LLM agents: auto (default, measured) or required (a tool call every turn: F1 "
        "through the server's tool_choice, F2 through JSON-schema constrained actions); "
        "same as UNDOBENCH_LLM_TOOL_CHOICE",
    )
    r.add_argument(
        "--tools",
        choices=["direct", "mcp"],
        default=None,
        help="LLM agents: step the env directly (default) or list and call the tools through "
        "an MCP client session (docs/mcp.md)",
    )
    r.add_argument(
        "--annotations",
        choices=["on", "off", "on,off"],
        default=None,
        help="MCP agents: list the tools with their readOnly/destructive/idempotent hints "
        "(on), without (off), or run both arms and contrast them in the report (on,off)",
    )
    r.add_argument("--runtime", default=None, choices=["process", "docker"])
    r.add_argument("--max-steps", type=int, default=None, help="step budget (default 20)")
    r.add_argument(
        "--executor",
        default=None,
        choices=["local", "ray"],
        help="local (default) or ray (pip install 'undobench-gym[ray]')",
    )
    r.add_argument("--workers", type=int, default=None, help="parallel stacks/workers (default 1)")
    r.add_argument(
        "--lanes",
        type=int,
        default=None,
        help="pairs in flight per worker process, each on its own stacks (default 1): for "
        "agents that wait on a model server; a CPU-bound scripted sweep gets slower",
    )
    r.add_argument(
        "--trial-timeout",
        type=float,
        default=None,
        metavar="S",
        help="seconds per pair before it counts as an infrastructure error (default 300)",
    )
    r.add_argument(
        "--max-attempts",
        type=int,
        default=None,
        help="attempts per pair on infrastructure errors only (default 2: one retry)",
    )
    r.add_argument(
        "--max-stacks",
        type=int,
        default=None,
        help="stacks kept open per worker lane (default 4)",
    )
    r.add_argument(
        "--ray-address", default=None, help="an existing Ray cluster (default: start one)"
    )
    r.add_argument("--out", required=True, help="run directory")
    r.add_argument("--resume", action="store_true", help="skip pairs already recorded")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.add_argument(
        "--http-timeout",
        type=float,
        default=None,
        metavar="S",
        help="the env's client timeout per call (default 2): what a timeout fault costs; "
        "a call past it with no fault planned voids the pair (retried as infrastructure)",
    )
    r.add_argument(
        "--own-controls",
        action="store_true",
        help="every pair runs its own control episode (default: the pairs of one workflow, "
        "method and seed share one, recorded in control_from, where the agent's control "
        "does not depend on the scenario: the scripted agent, a model agent's seeded turns)",
    )
    r.add_argument(
        "--no-report",
        action="store_true",
        help="record trials.jsonl only, without the 'eval' extra (`undobench report` later)",
    )
    r.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Imports inside the handler keep `undobench --help` fast.
    from undobench_gym.harness.runner import run_sweep
    from undobench_gym.harness.sweep import load_sweep, resolve_execution, spec_from_flags

    given = {k: getattr(args, k) for k in FACTORIAL if getattr(args, k) is not None}
    if args.sweep:
        if given:
            flags = ", ".join("--" + k.replace("_", "-") for k in given)
            raise UndoBenchError(
                f"the factorial comes from --sweep {args.sweep}; drop {flags} "
                "(or put them in the sweep file)"
            )
        spec = load_sweep(args.sweep)
    else:
        if bool(args.workflows) == bool(args.split):
            raise UndoBenchError("give exactly one of --workflows ID,ID or --split dev|val|test")
        spec = spec_from_flags({"method": "bare", "seeds": "1-5", **given})
    if args.tools or args.annotations:
        agents = mcp_arms(spec.agents, args.tools, args.annotations)
        spec = spec.model_copy(update={"agents": agents})
    execution = resolve_execution(
        spec,
        executor=args.executor,
        workers=args.workers,
        lanes=args.lanes,
        trial_timeout=args.trial_timeout,
        max_attempts=args.max_attempts,
        max_stacks=args.max_stacks,
        ray_address=args.ray_address,
    )
    if args.tool_choice:  # read by the agents in every worker, like the other LLM settings
        os.environ["UNDOBENCH_LLM_TOOL_CHOICE"] = args.tool_choice
    out = Path(args.out)
    # Without the eval extra the sweep still runs and records its trials; the report is
    # written wherever the extra is installed (`undobench report OUT`).
    absent = missing("eval") if not args.no_report else []
    summary = run_sweep(
        spec.expand(),
        agent_spec=spec.agents[0],
        runtime=spec.runtime,
        out=out,
        resume=args.resume,
        max_steps=spec.max_steps,
        progress=not args.quiet and sys.stderr.isatty(),
        report=not args.no_report and not absent,
        share_controls=not args.own_controls,
        **({"http_timeout": args.http_timeout} if args.http_timeout is not None else {}),
        **execution,
    )
    if absent:
        print(f"recorded {out / 'trials.jsonl'}")
        print(
            f"undobench: the report needs the 'eval' extra (missing: {', '.join(absent)}): "
            f"pip install 'undobench-gym[eval]', then undobench report {out}",
            file=sys.stderr,
        )
    elif args.no_report:
        print(f"recorded {out / 'trials.jsonl'}; reports: undobench report {out}")
    else:
        print_summary(summary, out)
    return 0


def mcp_arms(agents: list[str], tools: str | None, annotations: str | None) -> list[str]:
    """Each agent spec on the MCP path (`#tools=mcp`; a `cmd:` agent is on it already),
    once per hint arm (`#annotations=off` names the off arm, so the arms are distinct
    agents whose pairs the report matches one to one)."""
    arms = annotations.split(",") if annotations else ["on"]
    out = []
    for agent in agents:
        for arm in arms:
            spec = agent
            mcp = tools == "mcp" or annotations is not None
            if mcp and not spec.startswith("cmd:") and "#tools=mcp" not in spec:
                spec += "#tools=mcp"
            out.append(spec + ("#annotations=off" if arm == "off" else ""))
    return out
