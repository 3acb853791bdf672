"""Validity audits over a run's trials: did the fault fire, are the pairs paired, did
anything reach the services without crossing the proxy.

Each audit returns an `Audit` with counts, problems (the CLI exits 1 when there are any)
and notes (reported, not failures). Records that lack what an audit needs (imported
reference rows) are counted as `unknown`, never judged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from undobench_gym.core.catalog import domain as load_domain
from undobench_gym.core.catalog import find_workflow
from undobench_gym.core.pairing import prefix_equivalent
from undobench_gym.core.schema import EpisodeRecord
from undobench_gym.evaluation.indicators import Pair, is_infra_error
from undobench_gym.evaluation.records import EpisodeLike, PairLike, as_episode, as_records

GOLD_AGENTS = ("scripted",)  # agents that follow the gold plan: an unfired fault is a defect


@dataclass
class Audit:
    name: str
    counts: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {
            "audit": self.name,
            "ok": self.ok,
            "counts": dict(self.counts),
            "problems": self.problems,
            "notes": self.notes,
        }


def _label(p: Pair) -> str:
    return (
        f"{p.workflow}/{p.scenario} seed {p.seed} "
        f"method {p.method} agent {p.agent} (pair {p.pair_id})"
    )


def _calls(episode: EpisodeRecord) -> list[str | None]:
    """Tools of the calls that crossed the proxy, in order (wire log, else transcript)."""
    if episode.wire is not None:
        return [e.get("tool") for e in episode.wire]  # wire events: dicts in the schema
    out: list[str | None] = []
    for entry in episode.transcript or []:
        obs = entry.get("observation")
        if isinstance(obs, dict) and "tool" in obs:
            out.append(str(obs["tool"]))
    return out


@cache
def _target(workflow: str, scenario: str) -> tuple[str, int] | None:
    try:
        t = find_workflow(workflow).scenario(scenario).target
    except Exception:  # not in this catalogue (imported rows, a removed scenario)
        return None
    return t.tool, t.nth


def audit_fired(pairs: Sequence[PairLike]) -> Audit:
    """Faults that did not fire: a defect of the scenario when the agent reached the target
    call (or follows the gold plan); otherwise the agent stopped before it (reported)."""
    a = Audit("fired")
    unfired: Counter[tuple[str, str, str]] = Counter()
    for p in as_records(pairs):
        if is_infra_error(p):
            a.counts["infra_errors"] += 1
            continue
        fired = p.fault.fault_fired
        if fired is None:
            a.counts["unknown"] += 1
            continue
        if fired:
            a.counts["fired"] += 1
            continue
        target = _target(str(p.workflow), str(p.scenario))
        calls = _calls(p.fault)
        reached = None if target is None else calls.count(target[0]) >= target[1]
        if reached or (reached is not None and p.agent in GOLD_AGENTS):
            a.counts["not_fired_defect"] += 1
            why = "target call reached" if reached else "the gold plan never reaches the target"
            a.problems.append(f"fault did not fire ({why}): {_label(p)}")
        elif reached is None:
            a.counts["not_fired_unknown_target"] += 1
            a.notes.append(f"fault did not fire, target unknown: {_label(p)}")
        else:
            a.counts["not_fired_not_reached"] += 1
            unfired[(str(p.workflow), str(p.scenario), str(p.agent))] += 1
    for (w, s, agent), n in sorted(unfired.items()):
        a.notes.append(f"{w}/{s}: agent {agent} stopped before the target call in {n} runs")
    return a


def _first_divergence(control: list[dict[str, Any]], fault: list[dict[str, Any]]) -> int:
    for i, (x, y) in enumerate(zip(control, fault, strict=False)):
        if x != y:
            return i + 1
    return min(len(control), len(fault)) + 1


def audit_prefix(pairs: Sequence[PairLike]) -> Audit:
    """Paired-prefix equivalence, recomputed from the transcripts and compared with the
    record's own flag."""
    a = Audit("prefix")
    for p in as_records(pairs):
        if is_infra_error(p):
            a.counts["infra_errors"] += 1
            continue
        c, f = p.control, p.fault
        if c.transcript is None or f.transcript is None:
            a.counts["unknown"] += 1
            continue
        # core.pairing takes the episodes as dicts: the fields it reads
        actual = prefix_equivalent(
            {"transcript": c.transcript},
            {"transcript": f.transcript, "fault": f.fault, "fault_fired": f.fault_fired},
        )
        stored = p.prefix_equivalent
        if stored is not None and stored != actual:
            a.counts["flag_mismatch"] += 1
            a.problems.append(
                f"record says prefix_equivalent={stored}, transcripts say {actual}: {_label(p)}"
            )
        if actual:
            a.counts["equivalent"] += 1
        else:
            a.counts["diverged"] += 1
            step = _first_divergence(c.transcript, f.transcript)
            a.problems.append(
                f"control and fault differ before the fault (step {step}): {_label(p)}"
            )
    return a


@cache
def _primary_ops(domain: str) -> dict[str, str]:
    """tool -> the op its route declares (x-undobench), for the domain's mutating tools."""
    try:
        tools = load_domain(domain).tools
    except Exception:
        return {}
    return {n: t.op for n, t in tools.items() if t.op and not t.read_only}


def check_episode(episode: EpisodeLike, domain: str | None) -> tuple[Counter[str], list[str]]:
    """Match every commit-log row to a forwarded, mutating wire event.

    A row whose op is the declared op of some tool needs a forwarded call of such a tool,
    one call per row; a row whose op no tool declares (an inner effect of a composite:
    one payout transfer) needs at least one forwarded mutating call of any tool. A row
    left over is an effect that reached the service without crossing the proxy as a
    forwarded request (e.g. a request the proxy says it dropped)."""
    counts: Counter[str] = Counter()
    issues: list[str] = []
    ep = as_episode(episode)
    rows, wire = ep.commit_log, ep.wire  # their rows and events: dicts in the schema
    if rows is None or wire is None:
        counts["episodes_unknown"] += 1
        return counts, issues
    counts["episodes"] += 1
    ops = _primary_ops(domain) if domain else {}
    declared = set(ops.values())
    forwarded = [e for e in wire if e.get("forwarded") and not e.get("read_only")]
    # The concurrent writer's rows came through the admin port, not the proxy.
    writers = [r for r in rows if r.get("actor")]
    rows = [r for r in rows if not r.get("actor")]
    counts["writer_rows"] += len(writers)
    counts["committed_rows"] += len(rows)
    counts["forwarded_mutating_events"] += len(forwarded)
    counts["dropped_mutating_events"] += sum(
        1 for e in wire if not e.get("forwarded") and not e.get("read_only")
    )
    available = Counter(ops.get(str(e.get("tool")), "") for e in forwarded)
    for r in rows:
        op = str(r.get("op"))
        if op in declared:
            ok = available[op] > 0
            if ok:
                available[op] -= 1
        else:
            ok = bool(forwarded)
        counts["matched_rows" if ok else "unmatched_rows"] += 1
        if not ok:
            issues.append(f"commit seq {r.get('seq')} {op} has no forwarded mutating call")
    return counts, issues


def audit_wire(pairs: Sequence[PairLike]) -> Audit:
    a = Audit("wire")
    for p in as_records(pairs):
        for side, episode in (("control", p.control), ("fault", p.fault)):
            counts, issues = check_episode(episode, p.domain)
            a.counts.update(counts)
            a.problems.extend(f"{side}: {msg}: {_label(p)}" for msg in issues)
    return a


AUDITS = {"fired": audit_fired, "prefix": audit_prefix, "wire": audit_wire}
