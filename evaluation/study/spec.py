"""A study definition: `study.toml` beside one sweep file per part.

A part is one `undobench run --sweep` whose role says how the document uses it: `scripted`
(the results: deterministic, rendered byte-identically from the same seeds), `runtime`
(the same pairs on another runtime, compared pair by pair with a scripted part) and
`smoke` (real language models at a small scale: a harness check, not a result).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from undobench_gym.errors import UndoBenchError

Role = Literal["scripted", "runtime", "smoke"]


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


class Study(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str
    #: the published reference data (../shared/reference-data/undobench-v1 in this repo)
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
