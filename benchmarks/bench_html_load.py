"""How long report.html takes to load, filter and open a pair, in headless Chromium (the
system browser through Playwright, as the browser test drives it).

    python benchmarks/bench_html_load.py RUN_DIR                # the run's own pairs
    python benchmarks/bench_html_load.py RUN_DIR --scale 5940   # synthetic scale-up

`--scale N` copies the run's recorded pairs (real records, new pair ids) until there are
N of them, into --out (default RUN_DIR-xN), and reports on that: a stand-in for a full
TEST factorial when there is no time to run one. Say which one was measured.

Measured, per repeat in a fresh browser page: `ready_ms` (in the page, from navigation
start until it is ready: HTML parsed, table rendered, filters filled; what a user waits
for), `wall_ms` (the same seen from Python: Playwright's round trips and the new page
included), `script_ms` (the page's own script, parse of the row data included),
`dom_content_loaded_ms`;
`filter_ms` (one filter applied and the table redrawn, in the page), `open_pair_ms`
(click on a row until the viewer shows it: the first inflates a detail chunk). Medians.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.evaluation.browser

from tests.evaluation.browser import browser, chromium_path
from undobench_gym.core.trials import read_trials
from undobench_gym.evaluation.report import write_reports

FILTER_JS = """() => {
  const sel = document.querySelector('select[data-col=harms]');
  sel.value = 'duplicate';
  const t = performance.now();
  sel.dispatchEvent(new Event('change'));
  return performance.now() - t;
}"""


def scaled(src: Path, n: int, out: Path) -> Path:
    trials = read_trials(src / "trials.jsonl")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    with (out / "trials.jsonl").open("w") as fh:
        for i in range(n):
            t = dict(trials[i % len(trials)])
            copy = i // len(trials)
            if copy:
                t["pair_id"] = f"{t['pair_id']}-x{copy}"
            fh.write(json.dumps(t, sort_keys=True) + "\n")
    return out


def measure(path: Path, repeat: int) -> dict[str, Any]:
    exe = chromium_path()
    if exe is None:
        raise SystemExit("no chromium on PATH")
    runs: list[dict[str, float]] = []
    with browser(exe) as b:
        for _ in range(repeat):
            page = b.new_page(viewport={"width": 1360, "height": 900})
            t = time.perf_counter()
            page.goto(path.as_uri(), wait_until="domcontentloaded", timeout=120_000)
            page.wait_for_selector("body[data-ready='1']", timeout=120_000)
            wall_ms = (time.perf_counter() - t) * 1000
            ready_ms = float(page.evaluate("() => +document.body.dataset.readyAt"))
            nav = page.evaluate(
                "() => performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd"
            )
            script_ms = float(page.evaluate("() => +document.body.dataset.readyMs"))
            filter_ms = float(page.evaluate(FILTER_JS))
            t = time.perf_counter()
            page.locator("#pair-table tbody tr").first.click()
            page.locator("#viewer").wait_for(state="visible")
            open_ms = (time.perf_counter() - t) * 1000
            runs.append(
                {
                    "ready_ms": ready_ms,
                    "wall_ms": wall_ms,
                    "script_ms": script_ms,
                    "dom_content_loaded_ms": float(nav),
                    "filter_ms": filter_ms,
                    "open_pair_ms": open_ms,
                }
            )
            page.close()
    return {k: round(statistics.median(r[k] for r in runs), 1) for k in runs[0]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path, help="run directory (trials.jsonl)")
    ap.add_argument("--scale", type=int, help="copy the run's pairs up to N pairs")
    ap.add_argument("--out", type=Path, help="where the scaled run goes")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-plots", action="store_true")
    args = ap.parse_args()
    run = args.dir
    if args.scale:
        run = scaled(args.dir, args.scale, args.out or Path(f"{args.dir}-x{args.scale}"))
    t = time.perf_counter()
    write_reports(run, plots=not args.no_plots, html=True)
    build_s = time.perf_counter() - t
    page = run / "report.html"
    result = {
        "dir": str(run),
        "synthetic_scale_up": bool(args.scale),
        "pairs": len(read_trials(run / "trials.jsonl")),
        "html_bytes": page.stat().st_size,
        "write_reports_s": round(build_s, 1),
        **measure(page, args.repeat),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
