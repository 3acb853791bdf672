"""The HTML report in a real browser: a real sweep (pay-charge-customer under a lost
acknowledgement, methods bare, B0 and B2, two seeds) through `undobench run` and
`undobench report --html`, opened in headless Chromium (the system browser through
Playwright). The test filters the pairs to "control succeeded, fault duplicated", opens a
pair and checks what the viewer shows: the fault step marked with what the agent saw and
what the wire did, B0's re-send shown as a wrapper retry and highlighted as the duplicate,
the duplicate row of the commit log, the verdict.

It fails (never skips) in CI when the browser is missing. With UB_SCREENSHOTS=DIR it saves
the README's screenshots there (report.png, pairs.png, pair.png); else under the test's tmp dir.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from undobench_gym.evaluation.html.pairs import harms_of

from .browser import browser, require_browser

pytestmark = pytest.mark.slow
SWEEP = [
    "--workflows",
    "pay-charge-customer",
    "--scenarios",
    "lost-ack",
    "--method",
    "bare,B0,B2",
    "--seeds",
    "1-2",
]


def _cli(*args: str) -> None:
    cmd = [sys.executable, "-m", "undobench_gym.harness.cli", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.fixture(scope="module")
def chromium() -> str:
    """Checked before the sweep, so a machine without the browser skips (or, in CI, fails)
    at once."""
    return require_browser()


@pytest.fixture(scope="module")
def run_dir(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("html-sweep")
    _cli("run", *SWEEP, "--out", str(out), "--quiet")
    _cli("report", str(out), "--html")
    return out


def _trials(out: Path) -> list[dict[str, Any]]:
    lines = (out / "trials.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_filter_then_open_a_pair_shows_the_fault_and_the_duplicate(
    chromium: str, run_dir: Path, tmp_path: Path
) -> None:
    shots = Path(os.environ.get("UB_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    trials = _trials(run_dir)
    wanted = [
        t["pair_id"]
        for t in trials
        if t["control"].get("success") and "duplicate" in harms_of(t["fault"])
    ]
    assert wanted, "the sweep should give at least one duplicated fault episode"
    with browser(chromium) as b:
        page = b.new_page(viewport={"width": 1360, "height": 900})
        requests: list[str] = []
        errors: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto((run_dir / "report.html").as_uri())
        page.wait_for_selector("body[data-ready='1']", timeout=30_000)
        match = page.text_content("#match") or ""
        assert match.startswith(f"{len(trials)} of {len(trials)} pairs match")
        assert "N = " in (page.text_content("[data-testid=counts]") or "")
        assert page.locator("table.breakdown[data-group=method] tbody tr").count() == 3
        page.screenshot(path=str(shots / "report.png"))

        # the filter: control succeeded and the fault episode duplicated
        page.select_option("select[data-col=control]", "succeeded")
        page.select_option("select[data-col=harms]", "duplicate")
        assert (page.text_content("#match") or "").startswith(f"{len(wanted)} of {len(trials)}")
        shown = page.locator("#pair-table tbody tr td:first-child").all_text_contents()
        assert sorted(shown) == sorted(wanted)
        page.locator("#pairs").screenshot(path=str(shots / "pairs.png"))

        # open a B0 pair: B0 re-sends the charge whose acknowledgement was lost
        row = page.locator("#pair-table tbody tr", has_text="B0").first
        pair_id = row.locator("td").first.text_content()
        row.click()
        viewer = page.locator("#viewer")
        viewer.wait_for(state="visible")
        assert viewer.get_attribute("data-pair") == pair_id
        fault_step = viewer.locator("[data-testid=fault-step]")
        assert fault_step.count() == 1
        text = fault_step.text_content() or ""
        assert "⚡ FAULT" in text and "create_charge" in text
        assert "agent saw: transport error: connection_reset" in text
        assert "upstream 201" in text  # the wire: the service committed, the reply was lost
        point = viewer.locator("[data-testid=fault-point]").text_content() or ""
        assert "the service committed the call" in point
        dup = viewer.locator("table.steps td.cell.harm-duplicate")
        assert dup.count() == 1
        assert "retry" in (dup.locator(".who").text_content() or "")  # B0's, not the agent's
        assert "create_charge" in (dup.text_content() or "")
        assert viewer.locator("table[data-side=fault] tr.harm-duplicate").count() == 1
        assert viewer.locator("table[data-side=control] tr.harm-duplicate").count() == 0
        assert viewer.locator("[data-verdict=fault] [data-harm=duplicate]").count() == 1
        assert viewer.locator("table.steps tr.shared").count() >= 1  # the shared prefix
        viewer.screenshot(path=str(shots / "pair.png"))

        # the URL keeps the view: a link opens the same pair with the same filters
        link = page.url
        assert f"pair={pair_id}" in link and "harms=duplicate" in link
        again = b.new_page()
        again.goto(link)
        again.wait_for_selector("body[data-ready='1']", timeout=30_000)
        assert again.locator("#viewer").get_attribute("data-pair") == pair_id
        assert again.locator("#viewer [data-testid=fault-step]").count() == 1

    assert not errors, errors
    assert all(u.startswith(("file:", "data:", "blob:")) for u in requests), requests
