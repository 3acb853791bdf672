"""The hint ablation: the same MCP agent with the tool annotations listed and without.

MCP tools carry `readOnlyHint`, `destructiveHint` and `idempotentHint`. Whether an agent
honours them when it retries is measured by running it twice over the same pairs, hints
on and hints off (an agent spec ending in `#annotations=off`, `undobench run
--annotations on,off`), and contrasting the arms on what the hints are about: duplicated
effects (`der`), re-issues after a commit (`urr`) and recovery among the tasks the agent
can do (`crsr`). The arms are matched pair by pair (same workflow, scenario, seed, method
and agent apart from the suffix), per method, with the method contrasts' statistics:
task-clustered bootstrap CI, paired permutation p (Holm within the method), McNemar.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from undobench_gym.core.schema import PairRecord
from undobench_gym.evaluation.indicators import Pair, is_infra_error
from undobench_gym.evaluation.records import PairLike, as_record
from undobench_gym.evaluation.report_sections import FEW
from undobench_gym.evaluation.summary import contrasts

HINT_METRICS = ("der", "urr", "crsr")
OFF = "#annotations=off"


class _Agent(BaseModel):
    """The one field `arm` reads, from a record given as a dict (whole or not: the arm of
    a pair is decided before the pair is read as a record)."""

    model_config = ConfigDict(extra="ignore")

    agent: str | None = None


def arm(p: PairLike) -> str | None:
    """ "off", "on" (an MCP agent with its hints), or None (not on the MCP path)."""
    agent = str((p.agent if isinstance(p, PairRecord) else _Agent.model_validate(p).agent) or "")
    if OFF in agent:
        return "hints off"
    if agent.startswith("cmd:") or "#tools=mcp" in agent:
        return "hints on"
    return None


def hint_contrasts(
    pairs: Sequence[PairLike], *, condition: bool | None = None
) -> list[dict[str, Any]]:
    """Hints off minus hints on, per method and metric; [] when the run has no off arm."""
    on_arms = [(a, as_record(p)) for p in pairs if (a := arm(p)) is not None]
    tagged = [(a, p) for a, p in on_arms if not is_infra_error(p)]
    if not any(a == "hints off" for a, _ in tagged):
        return []
    # The same agent in both arms, so that the arms match pair by pair; each copy's arm
    # is kept beside it (by identity: the copies live as long as `arms`).
    arms: list[Pair] = []
    hints: dict[int, str] = {}
    for a, p in tagged:
        copy = p.model_copy(update={"agent": str(p.agent).replace(OFF, "")})
        arms.append(copy)
        hints[id(copy)] = a
    out: list[dict[str, Any]] = []
    for method in sorted({str(p.method) for p in arms}):
        group = [p for p in arms if str(p.method) == method]
        found = contrasts(
            group, condition=condition, key=lambda p: hints[id(p)], metrics=HINT_METRICS
        )
        out += [{"method": method, **c} for c in found]
    return out


def hint_lines(summary: dict[str, Any]) -> list[str]:
    rows = summary.get("hints") or []
    if not rows:
        return []
    lines = [
        "",
        "## Tool hints: off vs on",
        "",
        "The same MCP agent with the tools' readOnly/destructive/idempotent hints listed",
        "(on) and left out (off), matched pair by pair; `diff` is off minus on. Paired over",
        "tasks as the method contrasts (Holm within each method); McNemar on matched units",
        "(cells when every cell's seeds end alike). No interval from fewer than 5 tasks.",
        "",
        "| method | metric | diff | 95% CI | p | p (Holm) | p (McNemar) | discordant |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in rows:
        ci = "-" if c["ci"] is None else f"[{c['ci'][0]:+.3f}, {c['ci'][1]:+.3f}]"
        ci = FEW if c.get("ci_reason") else ci
        ps = [("-" if x is None else f"{x:.3g}") for x in (c["p"], c["p_holm"], c["p_mcnemar"])]
        mc = c["mcnemar"]
        lines.append(
            f"| {c['method']} | {c['metric']} | {c['diff']:+.3f} | {ci} | {' | '.join(ps)} "
            f"| {mc['a_only']}/{mc['b_only']} |"
        )
    return lines
