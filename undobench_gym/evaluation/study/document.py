"""Assemble docs/study.md, its figures and the study's manifest from the runs."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.evaluation.indicators import is_infra_error
from undobench_gym.evaluation.reference import headline
from undobench_gym.evaluation.study import model_part, tables
from undobench_gym.evaluation.study.manifest import MANIFEST, build_manifest
from undobench_gym.evaluation.study.render import (
    MEASURED,
    PLACEHOLDER,
    PLOTS,
    PartRun,
    _design,
    _main_sections,
    _paper_sections,
    _runtime_sections,
    load_part,
)
from undobench_gym.evaluation.study.spec import Study

READING = "reading.md"


def fill(text: str, main: PartRun, extra: dict[str, str] | None = None) -> str:
    """The reading's `{{metric:method}}` and `{{metric:method:BOUNDARY}}` placeholders,
    replaced by the figures of the main part, so that its prose cannot drift from the data;
    `extra` names further figures (`{{crsr:paper-adjusted}}`, `{{h1:all}}`: the section
    beside the paper computes them). An unknown one is an error, not a blank."""
    named = extra or {}
    valid = [p for p in main.pairs if not is_infra_error(p)]
    applied = bool(main.summary["overall"]["conditioning"]["applied"])
    grids: dict[str, dict[tuple[str, str], Any]] = {}

    def value(m: re.Match[str]) -> str:
        metric, method, boundary = m.group(1), m.group(2), m.group(3)
        if boundary is None and f"{metric}:{method}" in named:
            return named[f"{metric}:{method}"]
        if boundary is None:
            by = main.summary["by"]["method"].get(method)
            if by is None or metric not in by:
                raise UndoBenchError(f"{READING}: no figure for {m.group(0)}")
            return tables.num(by[metric]["value"])
        if metric not in grids:
            grids[metric] = tables.grid_values(valid, applied, metric)
        r = grids[metric].get((method, boundary))
        if r is None:
            raise UndoBenchError(f"{READING}: no figure for {m.group(0)}")
        return tables.num(r["value"])

    return PLACEHOLDER.sub(value, text)


def _wall(meta: dict[str, Any]) -> tuple[float, int, int]:
    sessions = meta.get("sessions") or []
    wall = sum(s.get("wall_s") or 0.0 for s in sessions)
    written = sum(s.get("written") or 0 for s in sessions)
    workers = max((s.get("workers") or 1 for s in sessions), default=1)
    return wall, written, workers


def _measured(study: Study, runs: dict[str, PartRun | None], manifest: dict[str, Any]) -> list[str]:
    lines = [
        "",
        MEASURED,
        "",
        "## Measured in this run of the study",
        "",
        f"Machine: {os.cpu_count()} CPUs. Wall time per part (from each run's "
        "`run_meta.json`, every session of a resumed run added up; reports excluded):",
        "",
        "| part | pairs written | wall time | pairs/s | workers |",
        "|---|---|---|---|---|",
    ]
    total = 0.0
    for p in study.parts:
        run = runs.get(p.name)
        if run is None:
            continue
        wall, written, workers = _wall(run.meta)
        total += wall
        rate = f"{written / wall:.2f}" if wall else "-"
        lines.append(f"| {p.name} | {written} | {wall / 60:.1f} min | {rate} | {workers} |")
    lines += ["", f"The whole study: {total / 60:.1f} min of sweeps.", ""]
    for p in study.parts:
        run = runs.get(p.name)
        if run is None or p.role != "smoke":
            continue
        b, o = run.summary["agent_behaviour"], run.summary["overall"]
        lines += [
            f"### {p.title} (a harness smoke test, not a result)",
            "",
            f"{b['pairs']} pairs, {o['infra_errors']} infrastructure errors; schema-valid "
            f"actions {b['valid_actions']}/{b['actions']}; control successes "
            f"{b['control_success']}; median {b['turns_per_episode_median']} turns an episode "
            f"and {b['seconds_per_pair_median']} s a pair; {b.get('completion_tokens')} "
            f"tokens out in {b.get('requests')} requests.",
            "",
            *tables.by_group(run.summary, "framework", ("control_rate", "crsr", "der")),
            "",
        ]
    lines += ["### Raw result files (sha256 as written; see the manifest)", ""]
    for name, entry in manifest["parts"].items():
        lines.append(f"- `{name}/trials.jsonl`: {entry['pairs']} pairs, `{entry['trials_sha256']}`")
    lines += ["", "Code each part ran with (git commit; `+` local changes):", ""]
    for name, entry in manifest["parts"].items():
        versions = entry["code"] or [{"commit": None, "dirty": None}]
        text = ", ".join(f"`{v['commit']}`{'+' if v['dirty'] else ''}" for v in versions)
        lines.append(f"- {name}: {text}")
    return lines


def render_study(
    study: Study,
    study_dir: Path,
    runs: Path,
    *,
    doc: Path,
    reference: Path | None,
    command: str,
) -> dict[str, Any]:
    """Write `doc`, its figures (beside it, in a folder named after it) and the manifest;
    returns the manifest."""
    loaded = {
        p.name: load_part(p.out(study_dir, runs), p, html=p is study.main) for p in study.parts
    }
    main = loaded[study.main.name]
    if main is None:
        raise UndoBenchError(
            f"the main part {study.main.name!r} has no {runs / study.main.name}/trials.jsonl"
        )
    figures = doc.parent / doc.stem
    figures.mkdir(parents=True, exist_ok=True)
    for name in PLOTS:
        shutil.copyfile(main.part.out(study_dir, runs) / name, figures / name)
    rel = doc.stem
    lines = _design(study, loaded, command)
    lines += _main_sections(main, rel)
    paper_lines, facts = _paper_sections(main, reference, figures, rel)
    lines += paper_lines
    head = headline(reference) if reference is not None and reference.is_dir() else None
    for p in study.parts:
        run = loaded[p.name]
        if p.role == "runtime" and run is not None and p.compare_with:
            base = loaded[p.compare_with]
            if base is not None:
                lines += _runtime_sections(run, base)
    for p in study.parts:
        run = loaded[p.name]
        if p.role == "model" and run is not None:
            notes = study_dir / f"{p.name}.md"
            lines += model_part.section(
                p.title,
                run.pairs,
                main.pairs,
                notes.read_text(encoding="utf-8") if notes.is_file() else "",
                paper=head,
            )
    reading = study_dir / READING
    if reading.is_file():
        lines += ["", fill(reading.read_text(encoding="utf-8"), main, facts).rstrip()]
    lines += [
        "",
        "## Verifying a copy",
        "",
        f"`{study_dir.as_posix()}/{MANIFEST}` holds each part's verdict digest (a hash of every "
        "pair's verdicts, transcripts and final-state hash, in pair-id order; timings left "
        "out), the hash of the catalogue the runs used and of the reference files. "
        "`undobench study verify RUNS` recomputes the digests of a copy of the runs, or of a "
        "re-run, and says what differs (the scripted and runtime parts; a real model's smoke "
        "part need not repeat). The raw `trials.jsonl` files are not kept in the "
        "repository (tens of MB); the command above reproduces them, and the digests show "
        "that it did.",
    ]
    manifest = build_manifest(study, study_dir, runs, reference)
    lines += ["", "| part | pairs | verdict digest |", "|---|---|---|"]
    lines += [
        f"| {n} | {e['pairs']} | `{e['verdict_digest']}` |"
        for n, e in manifest["parts"].items()
        if e["role"] != "smoke"
    ]
    lines += _measured(study, loaded, manifest)
    doc.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (study_dir / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest
