"""The hint ablation end to end: `undobench run --annotations on,off` runs each MCP agent
twice (hints listed, hints left out), and the report contrasts the arms pair by pair on
DER, URR and CRSR with the method contrasts' paired statistics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="pip install -e '.[mcp]'")

from undobench_gym.evaluation.hints import hint_contrasts
from undobench_gym.harness.cli import main
from undobench_gym.harness.cli.run import mcp_arms

from .conftest import use_gold

WF = "pay-charge-customer"


def test_arms_are_distinct_mcp_agents() -> None:
    assert mcp_arms(["openai:m@http://h/v1"], None, "on,off") == [
        "openai:m@http://h/v1#tools=mcp",
        "openai:m@http://h/v1#tools=mcp#annotations=off",
    ]
    assert mcp_arms(["cmd:agent {mcp_url}"], None, "off") == ["cmd:agent {mcp_url}#annotations=off"]
    assert mcp_arms(["openai:m@http://h/v1"], "mcp", None) == ["openai:m@http://h/v1#tools=mcp"]
    assert hint_contrasts([{"agent": "scripted", "method": "bare"}]) == []


def test_run_with_both_arms_reports_the_contrast(fake: Any, tmp_path: Path) -> None:
    use_gold(fake, [WF])
    args = ["run", "--workflows", WF, "--scenarios", "lost-ack,ambiguous", "--method", "bare"]
    args += ["--seeds", "1-3", "--agent", f"openai:fake@{fake.base_url}", "--framework", "F1"]
    args += ["--annotations", "on,off", "--out", str(tmp_path), "--quiet"]
    assert main(args) == 0
    trials = [json.loads(line) for line in (tmp_path / "trials.jsonl").read_text().splitlines()]
    agents = {t["agent"] for t in trials}
    assert agents == {"openai:fake@F1#tools=mcp", "openai:fake@F1#tools=mcp#annotations=off"}
    summary = json.loads((tmp_path / "summary.json").read_text())
    rows = {(c["method"], c["metric"]): c for c in summary["hints"]}
    assert set(rows) >= {("bare", "der"), ("bare", "urr"), ("bare", "crsr")}
    for c in rows.values():
        assert (c["a"], c["b"]) == ("hints off", "hints on")
        # The built-in agents never show the hints to the model: the arms agree exactly.
        assert c["diff"] == 0 and c["mcnemar"]["a_only"] == c["mcnemar"]["b_only"] == 0
        assert c["mcnemar"]["matched"] == 6
    assert "## Tool hints: off vs on" in (tmp_path / "report.md").read_text()
