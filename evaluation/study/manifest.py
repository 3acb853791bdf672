"""The study's manifest: what anyone needs to check a copy of its results.

Per part: the sweep file's hash, the seeds, the pair count, the hash of `trials.jsonl` as
written (it holds wall times, so it changes on every re-run) and the verdict digest (it
does not: the same pairs reaching the same verdicts give the same digest, on any machine).
Beside them the code version and a hash of the catalogue (every workflow's task, plan,
oracle and scenarios) the runs used, and the reference files the paper's figures came from.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

from undobench_gym.catalog import all_workflows
from undobench_gym.trials import read_trials

from .spec import Study
from .verdicts import digest

MANIFEST = "manifest.json"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def catalogue_sha256(workflows: set[str]) -> str:
    """The workflows a study ran, as their specs serialise (task, parameters, plan,
    oracles, scenarios): other workflows may be added without changing it."""
    specs = [w.model_dump(mode="json") for w in all_workflows() if w.id in workflows]
    return hashlib.sha256(json.dumps(specs, sort_keys=True).encode()).hexdigest()


def code_version(root: Path | None = None) -> dict[str, Any]:
    """The git commit of the code (this package's checkout), and whether it had local
    changes; null outside a git checkout (an installed wheel)."""
    root = root or Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": bool(dirty)}


def part_entry(study_dir: Path, runs: Path, name: str, sweep: str) -> dict[str, Any]:
    trials = runs / name / "trials.jsonl"
    records = read_trials(trials)
    seeds = sorted({r["seed"] for r in records})
    return {
        "workflows": sorted({r["workflow"] for r in records}),
        "sweep": sweep,
        "sweep_sha256": sha256_file(study_dir / sweep),
        "pairs": len(records),
        "seeds": seeds,
        "trials_sha256": sha256_file(trials),
        "verdict_digest": digest(records),
    }


def build_manifest(
    study: Study, study_dir: Path, runs: Path, reference: Path | None
) -> dict[str, Any]:
    parts = {
        p.name: {"role": p.role, **part_entry(study_dir, runs, p.name, p.sweep)}
        for p in study.parts
        if (runs / p.name / "trials.jsonl").is_file()
    }
    ref: dict[str, str] = {}
    if reference is not None and reference.is_dir():
        for f in sorted(reference.rglob("*")):
            if f.is_file() and f.suffix in {".csv", ".json"}:
                ref[str(f.relative_to(reference))] = sha256_file(f)
    return {
        "study": study.title,
        "code": code_version(),
        "catalogue_sha256": catalogue_sha256(
            {w for entry in parts.values() for w in entry["workflows"]}
        ),
        "parts": parts,
        "reference_sha256": ref,
    }


def verify(manifest: dict[str, Any], runs: Path) -> list[str]:
    """What differs between the manifest's verdict digests and the runs under `runs`."""
    problems = []
    for name, entry in manifest["parts"].items():
        trials = runs / name / "trials.jsonl"
        if not trials.is_file():
            problems.append(f"{name}: no {trials}")
            continue
        records = read_trials(trials)
        if len(records) != entry["pairs"]:
            problems.append(f"{name}: {len(records)} pairs, the manifest has {entry['pairs']}")
        if digest(records) != entry["verdict_digest"]:
            problems.append(f"{name}: verdict digest differs")
    used = {w for entry in manifest["parts"].values() for w in entry["workflows"]}
    if manifest["catalogue_sha256"] != catalogue_sha256(used):
        problems.append("the catalogue differs from the one the study ran on")
    return problems
