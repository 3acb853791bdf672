"""report.html without a browser: what the pair viewer is given for a real pair (a B0
lost-acknowledgement pair recorded from a sweep), that the page is self-contained and
carries every pair, the CLI's `report --html` and `view` (it serves on 127.0.0.1)."""

from __future__ import annotations

import base64
import gzip
import json
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from undobench_gym.evaluation.html import REPORT_FILE, render_html
from undobench_gym.evaluation.html.pairs import ROW_COLUMNS, pair_detail, table_row
from undobench_gym.evaluation.report import write_reports
from undobench_gym.evaluation.summary import summarize
from undobench_gym.harness.cli import main
from undobench_gym.harness.cli.view import make_server

from .factories import episode, trial

FIXTURE = Path(__file__).parent / "fixtures" / "html_pair_b0_lost_ack.json"
TOOLS = {"get_customer": "read", "create_charge": "mutation", "refund_charge": "compensation"}


@pytest.fixture
def lost_ack() -> dict[str, Any]:
    """B0 on pay-charge-customer/lost-ack: the reply to create_charge is dropped after the
    commit, B0 re-sends it, the charge is committed twice."""
    record: dict[str, Any] = json.loads(FIXTURE.read_text())
    return record


def _chunks(page: str) -> list[Any]:
    found = re.search(r'<script type="application/json" id="ub-chunks">(.*?)</script>', page)
    assert found
    out: list[Any] = []
    for chunk in json.loads(found.group(1)):
        out += json.loads(gzip.decompress(base64.b64decode(chunk)))
    return out


def _rows(page: str) -> list[list[Any]]:
    found = re.search(r'<script type="application/json" id="ub-data">(.*?)</script>', page)
    assert found
    data = json.loads(found.group(1))
    assert data["columns"] == list(ROW_COLUMNS)
    rows: list[list[Any]] = data["rows"]
    return rows


def test_the_fault_step_the_retry_and_the_duplicate_are_placed(lost_ack: dict[str, Any]) -> None:
    d = pair_detail(lost_ack, TOOLS)
    fault = d["fault"]
    assert [c["fault"] for c in fault] == [False, True, False, False]
    hit = fault[1]
    assert hit["o"] == "transport error: connection_reset"  # what the agent saw
    assert "upstream 201" in hit["w"]  # what happened on the wire: the service committed
    assert hit["harm"] == []  # the first charge is the required one
    assert fault[2]["who"] == "retry" and fault[2]["harm"] == ["duplicate"]
    assert {c["who"] for c in d["control"]} == {"agent"}
    assert d["shared"] == 2  # get_customer and the create_charge the fault hit
    assert d["fault_point"]["committed"] is True and d["fault_point"]["step"] == 2
    assert [r["harm"] for r in d["commits"]["fault"]] == [[], ["duplicate"]]
    assert d["commits"]["control"][0]["harm"] == []
    assert d["diff"]["same_state"] is False
    [effect] = d["diff"]["effects"]
    assert effect["effect"].startswith("charge.create")
    assert (effect["control"], effect["fault"]) == (1, 2)
    assert "duplicate" in d["verdict"]["fault"]["harms"]
    assert d["verdict"]["control"]["outcome"] == "succeeded"


def test_a_crash_mid_call_counts_as_reaching_the_service() -> None:
    """B0 on pay-split-payout/crash-mid-batch: the service crashes after the first of three
    transfers (the agent sees a reset, no status), B0 re-sends the payout: the re-send is
    the duplicate, and the half-paid payout is a partial state listed in the verdict."""
    record = json.loads((FIXTURE.parent / "html_pair_b0_crash_mid_batch.json").read_text())
    d = pair_detail(record, {"create_payout": "mutation"})
    fault = d["fault"]
    assert fault[0]["fault"] is True and fault[0]["harm"] == []
    assert fault[1]["who"] == "retry" and fault[1]["harm"] == ["duplicate"]
    assert [r["harm"] for r in d["commits"]["fault"]].count(["duplicate"]) == 2
    assert set(d["verdict"]["fault"]["harms"]) == {"duplicate", "partial"}


def test_the_table_row_carries_what_the_filters_need(lost_ack: dict[str, Any]) -> None:
    row = dict(zip(ROW_COLUMNS, table_row(lost_ack), strict=True))
    assert row["method"] == "B0" and row["boundary"] == "POST_MUTATION_PRE_ACK"
    assert (row["control"], row["fault"], row["harms"]) == ("succeeded", "failed", ["duplicate"])
    assert row["as_planned"] is True


def test_the_page_is_self_contained_and_carries_every_pair(lost_ack: dict[str, Any]) -> None:
    pairs = [lost_ack, *(trial(True, False, method=m) for m in ("bare", "B2") for _ in range(3))]
    pairs.append(trial(episode(True, error="stack did not come back"), True))
    for ep in (pairs[1]["control"], pairs[1]["fault"]):
        ep["transcript"] = None  # an imported reference row
    page = render_html(pairs, summarize(pairs), [], title="t")
    # nothing is fetched at view time: no external URL in src/href, a CSP that forbids it
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', page)
    assert "default-src 'none'" in page
    assert "</script" not in page.split('id="ub-data">', 1)[1].split("</script>", 1)[0]
    rows = _rows(page)
    assert [r[0] for r in rows] == [p["pair_id"] for p in pairs]
    assert rows[-1][ROW_COLUMNS.index("fault")] == "infra_error"
    details = _chunks(page)
    assert [d["head"]["pair_id"] for d in details] == [p["pair_id"] for p in pairs]
    assert details[0]["fault"][1]["fault"] is True
    assert details[1]["transcripts"] is False
    assert "N = <b>" in page and "Excluded pairs:" in page  # the counts behind the rates


def test_a_record_text_cannot_break_out_of_the_page(lost_ack: dict[str, Any]) -> None:
    lost_ack["workflow"] = "</script><script>alert(1)</script>"
    page = render_html([lost_ack], summarize([lost_ack]), [])
    assert "<script>alert(1)" not in page


def test_report_html_from_the_cli(tmp_path: Path, lost_ack: dict[str, Any]) -> None:
    lines = [lost_ack, *(trial(True, b, method="bare") for b in (True, False))]
    (tmp_path / "trials.jsonl").write_text("".join(json.dumps(t) + "\n" for t in lines))
    assert main(["report", str(tmp_path), "--html", "--no-plots"]) == 0
    page = (tmp_path / REPORT_FILE).read_text()
    assert len(_rows(page)) == 3
    write_reports(tmp_path, html=True)  # with the plots: inlined as data: URLs
    page = (tmp_path / REPORT_FILE).read_text()
    assert page.count('src="data:image/png;base64,') == 4


@pytest.mark.parametrize("cmd", [["report", "--html"], ["view"]])
def test_a_directory_without_trials_is_a_clear_error(
    tmp_path: Path, cmd: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*cmd, str(tmp_path)]) == 2
    assert "trials.jsonl not found" in capsys.readouterr().err


def test_the_server_serves_the_run_directory_on_loopback(tmp_path: Path) -> None:
    (tmp_path / REPORT_FILE).write_text("<html>ok</html>")
    server = make_server(tmp_path)
    assert server.server_address[0] == "127.0.0.1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/{REPORT_FILE}"
        r = httpx.get(url, timeout=5)
        assert r.status_code == 200 and r.text == "<html>ok</html>"
    finally:
        server.shutdown()
        server.server_close()


def test_view_on_a_port_in_use_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "trials.jsonl").write_text("")
    (tmp_path / REPORT_FILE).write_text("<html></html>")
    busy = make_server(tmp_path)
    try:
        assert main(["view", str(tmp_path), "--port", str(busy.server_address[1])]) == 2
        assert "cannot listen on 127.0.0.1" in capsys.readouterr().err
    finally:
        busy.server_close()


def test_view_writes_the_report_prints_the_url_and_stops_on_ctrl_c(
    tmp_path: Path, lost_ack: dict[str, Any]
) -> None:
    (tmp_path / "trials.jsonl").write_text(json.dumps(lost_ack) + "\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "undobench_gym.harness.cli", "view", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # as a shell without job control starts `cmd &` (a CI script): SIGINT ignored,
        # which the command must undo to stop on Ctrl-C
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        assert proc.stdout is not None
        line = ""
        for _ in range(3):  # "writing ...", then "serving ... at URL"
            line = proc.stdout.readline()
            if "serving" in line:
                break
        found = re.search(r"(http://127\.0\.0\.1:\d+/report\.html)", line)
        assert found, line
        r = httpx.get(found.group(1), timeout=10)
        assert r.status_code == 200 and "UndoBench run report" in r.text
        assert (tmp_path / REPORT_FILE).exists()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "stopped" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
