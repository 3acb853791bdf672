"""Audits (fired, prefix, wire) on synthetic records, and all of them plus `inspect` on a
small real run."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from undobench_gym.core.trials import TrialWriter
from undobench_gym.evaluation.audits import audit_fired, audit_prefix, audit_wire, check_episode
from undobench_gym.harness.cli import main
from undobench_gym.harness.runner import expand, run_sweep

from .factories import episode, trial


def _wire(*tools: str, forwarded: bool = True, read_only: bool = False) -> list[dict[str, Any]]:
    return [
        {"index": i + 1, "tool": t, "read_only": read_only, "forwarded": forwarded}
        for i, t in enumerate(tools)
    ]


def _fault(fired: bool | None, wire: list[dict[str, Any]] | None) -> dict[str, Any]:
    e = episode(False, fault_fired=fired)
    e["wire"] = wire
    return e


def _pair(fault: dict[str, Any], agent: str = "scripted", **kw: Any) -> dict[str, Any]:
    p = trial(True, fault, workflow="pay-charge-customer", scenario="lost-ack", **kw)
    p["agent"] = agent
    return p


# --- fired ----------------------------------------------------------------------------------


def test_fired_audit_tells_defects_from_agents_that_stopped_early() -> None:
    pairs = [
        _pair(_fault(True, _wire("get_customer", "create_charge"))),
        # The target (first create_charge) was reached, yet nothing fired: a defect.
        _pair(_fault(False, _wire("get_customer", "create_charge")), pair_id="reached"),
        # A non-gold agent stopped before the target: reported, not a defect.
        _pair(_fault(False, _wire("get_customer")), agent="python:m:Lazy", pair_id="early"),
        # The gold plan itself never reaching the target is a defect.
        _pair(_fault(False, _wire("get_customer")), pair_id="gold-short"),
        _pair(_fault(None, None)),
    ]
    pairs.append(trial(True, _fault(False, []), workflow="not-in-catalogue", pair_id="x"))
    a = audit_fired(pairs)
    assert not a.ok
    assert a.counts == {
        "fired": 1,
        "not_fired_defect": 2,
        "not_fired_not_reached": 1,
        "not_fired_unknown_target": 1,
        "unknown": 1,
    }
    assert any("target call reached" in p and "reached)" in p for p in a.problems)
    assert any("gold plan never reaches" in p and "gold-short" in p for p in a.problems)
    assert any("python:m:Lazy stopped before the target call in 1 runs" in n for n in a.notes)


# --- prefix ---------------------------------------------------------------------------------


def _step(tool: str, n: int, status: int = 200) -> dict[str, Any]:
    return {
        "step": n,
        "action": {"tool": tool, "arguments": {"n": n}},
        "observation": {"tool": tool, "status": status, "body": {}},
    }


def _prefix_pair(diverge: bool, stored: bool | None) -> dict[str, Any]:
    ctrl = episode(True, transcript=[_step("get_customer", 1), _step("create_charge", 2)])
    fault_steps = [_step("get_customer", 1), _step("create_charge", 2, status=599)]
    if diverge:
        fault_steps[0] = _step("list_charges", 1)
    flt = episode(False, transcript=fault_steps)
    flt["fault"] = {"index": 2}
    p = trial(ctrl, flt)
    p["prefix_equivalent"] = stored
    return p


def test_prefix_audit() -> None:
    ok = audit_prefix([_prefix_pair(False, True), _prefix_pair(False, None)])
    assert ok.ok and ok.counts == {"equivalent": 2}
    bad = audit_prefix([_prefix_pair(True, False), _prefix_pair(True, True)])
    assert bad.counts == {"diverged": 2, "flag_mismatch": 1}
    assert any("step 1" in p for p in bad.problems)
    assert any("record says prefix_equivalent=True" in p for p in bad.problems)
    unknown = copy.deepcopy(_prefix_pair(False, True))
    unknown["fault"]["transcript"] = None
    assert audit_prefix([unknown]).counts == {"unknown": 1}


# --- wire -----------------------------------------------------------------------------------


def _rows(*ops: str) -> list[dict[str, Any]]:
    return [{"seq": i + 1, "op": op} for i, op in enumerate(ops)]


def _logged(commit_log: list[dict[str, Any]], wire: list[dict[str, Any]]) -> dict[str, Any]:
    """An episode record with this commit log and wire log."""
    return {**episode(), "commit_log": commit_log, "wire": wire}


def test_wire_audit_matches_rows_to_forwarded_calls() -> None:
    ok = _logged(_rows("charge.create"), _wire("get_customer", "create_charge"))
    counts, issues = check_episode(ok, "payments")
    assert issues == [] and counts["matched_rows"] == 1
    # Composite: one forwarded create_payout explains payout.create and its transfers.
    payout = _logged(
        _rows("payout.create", "payout.transfer", "payout.transfer"), _wire("create_payout")
    )
    assert check_episode(payout, "payments")[1] == []


def test_wire_audit_flags_effects_that_did_not_cross_the_proxy() -> None:
    # The proxy says it dropped the request (PRE_MUTATION), yet the service committed.
    dropped = _logged(_rows("charge.create"), _wire("create_charge", forwarded=False))
    counts, issues = check_episode(dropped, "payments")
    assert counts["unmatched_rows"] == 1 and counts["dropped_mutating_events"] == 1
    assert "charge.create has no forwarded mutating call" in issues[0]
    # Two charges committed, one forwarded call: one escaped.
    twice = _logged(_rows("charge.create", "charge.create"), _wire("create_charge"))
    assert check_episode(twice, "payments")[0]["unmatched_rows"] == 1
    # A read-only call cannot explain a commit.
    read = _logged(_rows("charge.create"), _wire("get_charge", read_only=True))
    assert check_episode(read, "payments")[0]["unmatched_rows"] == 1
    pair = trial(True, True)
    pair["domain"] = "payments"
    pair["control"].update(commit_log=dropped["commit_log"], wire=dropped["wire"])
    pair["fault"].update(commit_log=_rows("charge.create"), wire=_wire("create_charge"))
    a = audit_wire([pair])
    assert not a.ok and len(a.problems) == 1 and a.problems[0].startswith("control:")
    assert a.counts["episodes"] == 2


def test_wire_audit_counts_unrecorded_episodes() -> None:
    a = audit_wire([trial(True, True)])  # factory episodes carry no wire or commit log
    assert a.ok and a.counts == {"episodes_unknown": 2}


# --- the CLI on a small real run --------------------------------------------------------


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run")
    trials = expand(["pay-charge-customer"], ["lost-ack", "pre-503"], ["bare", "B0"], [1])
    trials += expand(["pay-split-payout"], ["crash-mid-batch"], ["bare"], [1])
    run_sweep(trials, agent_spec="scripted", runtime="process", out=out, progress=False)
    return out


def test_audits_pass_on_a_real_run(real_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for kind in ("fired", "prefix", "wire"):
        assert main(["audit", kind, str(real_run)]) == 0, kind
    out = capsys.readouterr().out
    assert "audit fired: ok; fired=5" in out
    assert "audit prefix: ok; equivalent=5" in out
    assert "audit wire: ok;" in out and "unmatched_rows" not in out


def test_metrics_on_the_real_run_records(real_run: Path) -> None:
    """The env's own records: faults as planned, mechanisms, aware and abstention."""
    from undobench_gym.core.trials import read_trials
    from undobench_gym.evaluation.summary import summarize

    trials = read_trials(real_run / "trials.jsonl")
    s = summarize(trials)
    o = s["overall"]
    assert o["conditioning"]["applied"] is True and o["conditioning"]["as_planned"] == 5
    assert o["fired_rate"]["value"] == 1.0
    assert {k: m["N"] for k, m in s["by"]["mechanism"].items()} == {
        "crash_mid_mutation": 1,
        "reply_dropped_after_commit": 2,
        "request_dropped": 2,
    }
    bare = [t for t in trials if t["method"] == "bare"]
    by = {t["scenario"]: t for t in bare}
    # bare gives up at the transport error; after a lost ack the charge had committed:
    # right state by luck (rsr), not a recovery the agent knows about (rsr_aware).
    lost = summarize([by["lost-ack"]])["overall"]
    assert lost["rsr"]["value"] == 1.0 and lost["rsr_aware"]["value"] == 0.0
    # crash-mid-batch leaves a half-paid payout: a stop, but not a safe one.
    payout = by["crash-mid-batch"]
    assert payout["fault"]["effects"]["partial"] >= 1
    assert summarize([payout])["overall"]["abstention_rate"]["value"] == 0.0
    # pre-503: the request never reached the service; giving up there is safe.
    assert summarize([by["pre-503"]])["overall"]["abstention_rate"]["value"] == 1.0


def test_audit_exit_code_on_a_problem(
    real_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from undobench_gym.core.trials import read_trials

    trials = read_trials(real_run / "trials.jsonl")
    broken = copy.deepcopy(trials[0])
    broken["pair_id"] = "broken"
    for e in broken["control"]["wire"]:
        e["forwarded"] = False
    with TrialWriter(tmp_path / "trials.jsonl") as w:
        w.write(broken)
    assert main(["audit", "wire", str(tmp_path), "--json"]) == 1
    assert '"ok": false' in capsys.readouterr().out
    assert main(["audit", "wire", str(tmp_path / "nope")]) == 2


def test_inspect_shows_both_transcripts_and_the_fault(
    real_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from undobench_gym.core.trials import read_trials

    pair = next(
        t
        for t in read_trials(real_run / "trials.jsonl")
        if t["scenario"] == "lost-ack" and t["method"] == "B0"
    )
    assert main(["inspect", str(real_run), "--pair", pair["pair_id"][:12]]) == 0
    out = capsys.readouterr().out
    assert "⚡ FAULT" in out and "create_charge" in out
    assert "transport: connection_reset" in out
    assert "effect history (control):" in out and "effect history (fault):" in out
    assert out.count("charge.create (additive)") == 3  # 1 in control, 2 in the fault run
    assert main(["inspect", str(real_run), "--pair", "nope"]) == 2


@pytest.mark.parametrize(
    "cmd",
    [
        ["inspect"],
        ["import-reference"],
        ["audit"],
        ["audit", "fired"],
        ["audit", "prefix"],
        ["audit", "wire"],
        ["audit", "oracles"],
        ["report"],
    ],
)
def test_help_on_the_evaluation_commands(
    cmd: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main([*cmd, "--help"])
    assert info.value.code == 0
    assert "usage" in capsys.readouterr().out
