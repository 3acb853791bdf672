"""A study definition: `study.toml` beside one sweep file per part.

A part is one `undobench run --sweep` whose role says how the document uses it: `scripted`
(the results: deterministic, rendered byte-identically from the same seeds), `runtime`
(the same pairs on another runtime, compared pair by pair with a scripted part), `smoke`
(real language models at a small scale: a harness check, not a result) and `model` (a real
language model's results: competence per workflow, then recovery beside the scripted agent
and the paper; sampled, so not byte-identical on a re-run).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from undobench_gym.contract.errors import UndoBenchError

Role = Literal["scripted", "runtime", "smoke", "model"]


class Part(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    sweep: str
    role: Role
    title: str
    #: runtime parts: the scripted part whose pairs they repeat
    compare_with: str | None = None
    #: extra `undobench run` flags that a sweep file cannot hold (e.g. --tool-choice)
    run_args: list[str] = Field(default_factory=list)
    #: LLM agent settings for this part (UNDOBENCH_LLM_<KEY>, e.g. temperature = 0.7) and
    #: the model server's (UNDOBENCH_MODEL_<KEY>: server, context), recorded in the manifest
    llm: dict[str, str | int | float] = Field(default_factory=dict)
    model_server: dict[str, str | int] = Field(default_factory=dict)
    #: where the part's run lives, relative to the study folder, instead of under --runs:
    #: a real model's trials are kept in the repository, so that a long part resumes on
    #: another machine (`undobench study run` passes --resume)
    runs_dir: str | None = None

    def environment(self) -> dict[str, str]:
        """The environment variables this part's sweep runs with."""
        env = {f"UNDOBENCH_LLM_{k.upper()}": str(v) for k, v in self.llm.items()}
        env |= {f"UNDOBENCH_MODEL_{k.upper()}": str(v) for k, v in self.model_server.items()}
        return env

    def out(self, study_dir: Path, runs: Path) -> Path:
        """This part's run directory."""
        return study_dir / self.runs_dir if self.runs_dir else runs / self.name


class Study(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str
    #: the published reference data, relative to the study's folder (the paper-rerun study
    #: keeps a copy under reference/, with its sources and licence)
    reference: str | None = None
    parts: list[Part] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> Study:
        names = [p.name for p in self.parts]
        if len(set(names)) != len(names):
            raise ValueError(f"part names must be distinct: {names}")
        scripted = {p.name for p in self.parts if p.role == "scripted"}
        if not scripted:
            raise ValueError("a study needs at least one part with role = 'scripted'")
        for p in self.parts:
            if p.role == "runtime" and p.compare_with not in scripted:
                raise ValueError(
                    f"part {p.name!r}: compare_with must name a scripted part ({sorted(scripted)})"
                )
        return self

    @property
    def main(self) -> Part:
        """The first scripted part: the one the tables are computed from."""
        return next(p for p in self.parts if p.role == "scripted")


def load_study(directory: Path) -> tuple[Study, Path]:
    """The study in `directory` (its study.toml), with every sweep file checked to exist."""
    path = directory / "study.toml"
    if not path.is_file():
        raise UndoBenchError(f"no study.toml in {directory}")
    try:
        study = Study.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
    except (ValidationError, tomllib.TOMLDecodeError) as exc:
        raise UndoBenchError(f"{path}: {exc}") from exc
    for p in study.parts:
        if not (directory / p.sweep).is_file():
            raise UndoBenchError(f"{path}: part {p.name!r}: no sweep file {p.sweep}")
    return study, directory
