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

from undobench_gym.core.catalog import all_workflows
from undobench_gym.evaluation.records import load_records
from undobench_gym.evaluation.study.spec import Study
from undobench_gym.evaluation.study.verdicts import digest

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
    """The git commit of the code (this package's checkout, else the working directory's:
    an installed copy run from its source tree), and whether it had local changes."""
    if root is None:
        here = code_version(Path(__file__).resolve().parent)
        return here if here["commit"] else code_version(Path.cwd())
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


CODE_FILE = "code.json"


def record_code(out: Path) -> None:
    """Add the code version running now to the run directory's code.json (a run that is
    resumed with other code shows both)."""
    path = out / CODE_FILE
    seen = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []
    version = code_version()
    if version not in seen:
        seen.append(version)
    path.write_text(json.dumps(seen, indent=2) + "\n", encoding="utf-8")


def part_entry(study_dir: Path, out: Path, sweep: str) -> dict[str, Any]:
    trials = out / "trials.jsonl"
    code = out / CODE_FILE
    records = load_records(trials)
    seeds = sorted({r.seed for r in records})
    return {
        "workflows": sorted({r.workflow for r in records}),
        "code": json.loads(code.read_text(encoding="utf-8")) if code.is_file() else None,
        "sweep": sweep,
        "sweep_sha256": sha256_file(study_dir / sweep),
        "pairs": len(records),
        "seeds": seeds,
        "trials_sha256": sha256_file(trials),
        "verdict_digest": digest(records),
    }


def _model_entry(out: Path) -> dict[str, Any]:
    """A model part's provenance: the servers it ran and the agent settings and prompt
    digests its trials record (`agent_config`)."""
    configs = [r.agent_config or {} for r in load_records(out / "trials.jsonl")]
    settings = sorted({json.dumps(c, sort_keys=True) for c in configs})
    return {"model_servers": _servers(out), "agent_configs": [json.loads(c) for c in settings]}


def _servers(out: Path) -> list[Any]:
    """The model servers (kind, build, model file, slots) the part's sessions ran."""
    path = out / "run_meta.json"
    meta = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    seen: list[Any] = []
    for session in meta.get("sessions", []):
        servers = session.get("model_servers")
        if servers and servers not in seen:
            seen.append(servers)
    return seen


def build_manifest(
    study: Study, study_dir: Path, runs: Path, reference: Path | None
) -> dict[str, Any]:
    parts = {
        p.name: {
            "role": p.role,
            **part_entry(study_dir, p.out(study_dir, runs), p.sweep),
            **({"settings": p.environment()} if p.environment() else {}),
            **(_model_entry(p.out(study_dir, runs)) if p.role == "model" else {}),
        }
        for p in study.parts
        if (p.out(study_dir, runs) / "trials.jsonl").is_file()
    }
    ref: dict[str, str] = {}
    if reference is not None and reference.is_dir():
        for f in sorted(reference.rglob("*")):
            if f.is_file() and f.suffix in {".csv", ".json"}:
                ref[str(f.relative_to(reference))] = sha256_file(f)
    return {
        "study": study.title,
        "rendered_with": code_version(),
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
        if entry.get("role") in ("smoke", "model"):
            continue  # a real model's sampling need not repeat: its digest is a record only
        trials = runs / name / "trials.jsonl"
        if not trials.is_file():
            problems.append(f"{name}: no {trials}")
            continue
        records = load_records(trials)
        if len(records) != entry["pairs"]:
            problems.append(f"{name}: {len(records)} pairs, the manifest has {entry['pairs']}")
        if digest(records) != entry["verdict_digest"]:
            problems.append(f"{name}: verdict digest differs")
    used = {w for entry in manifest["parts"].values() for w in entry["workflows"]}
    if manifest["catalogue_sha256"] != catalogue_sha256(used):
        problems.append("the catalogue differs from the one the study ran on")
    return problems
