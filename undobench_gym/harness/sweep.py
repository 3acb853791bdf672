"""Sweep files: the whole factorial of a run in one TOML or YAML file (`run --sweep FILE`).

```toml
split = "test"                 # or: workflows = ["pay-charge-customer", ...]
scenarios = ["lost-ack"]       # optional; default every scenario of each workflow
boundaries = ["POST_MUTATION_PRE_ACK"]  # optional; keep the scenarios at these boundaries
methods = ["bare", "B0", "B2", "B2-K"]
seeds = "1-20"                 # or a list: [1, 2, 5]
agents = ["scripted"]          # or agent = "scripted"
frameworks = ["F1", "F2"]      # optional
runtime = "process"
max_steps = 20
[execution]                    # optional; command-line flags override these
workers = 2
lanes = 1                      # pairs in flight per worker process (default 1)
trial_timeout = 300
```

Expansion is deterministic (workflow x scenario x method x seed x agent x framework, in
the order given) and every pair has a stable id, so a resumed sweep skips exactly the
pairs already recorded.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from undobench_gym.agents import methods as method_registry
from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.contract.specs import Boundary
from undobench_gym.core.catalog import all_workflows, find_workflow
from undobench_gym.harness.executors import DEFAULT_MAX_STACKS, RetryPolicy
from undobench_gym.harness.runner import DEFAULT_TRIAL_TIMEOUT_S, TrialSpec, parse_seeds
from undobench_gym.harness.runner import expand as expand_factorial

_PLURAL = {
    "workflow": "workflows",
    "scenario": "scenarios",
    "boundary": "boundaries",
    "method": "methods",
}
_PLURAL |= {"agent": "agents", "framework": "frameworks", "seed": "seeds"}


_FLAGS = {v: "--" + k for k, v in _PLURAL.items()} | {
    "workflows": "--workflows",
    "seeds": "--seeds",
}


def _listify(value: Any) -> Any:
    """`"a,b"` or `"a"` or `["a", "b"]` -> a list of stripped strings."""
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return value


class Execution(BaseModel):
    """How to run the sweep; `undobench run` flags take precedence over these."""

    model_config = ConfigDict(extra="forbid")
    executor: Literal["local", "ray"] | None = None
    workers: int | None = Field(default=None, ge=1)
    lanes: int | None = Field(default=None, ge=1)
    trial_timeout: float | None = Field(default=None, gt=0)
    max_attempts: int | None = Field(default=None, ge=1)
    max_stacks: int | None = Field(default=None, ge=1)
    ray_address: str | None = None


class SweepSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    workflows: list[str] | None = None
    split: Literal["dev", "val", "test", "stress"] | None = None
    scenarios: list[str] | None = None
    boundaries: list[Boundary] | None = None
    methods: list[str] = Field(min_length=1)
    seeds: list[int] = Field(min_length=1)
    agents: list[str] = Field(default_factory=lambda: ["scripted"], min_length=1)
    frameworks: list[str] | None = None
    runtime: Literal["process", "docker"] = "process"
    max_steps: int = Field(default=20, ge=1, le=1000)
    execution: Execution = Field(default_factory=Execution)

    @model_validator(mode="before")
    @classmethod
    def _singular_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for one, many in _PLURAL.items():
            if one in data:
                if many in data:
                    raise ValueError(f"give either {one!r} or {many!r}, not both")
                data[many] = data.pop(one)
        return data

    @field_validator(
        "workflows", "scenarios", "boundaries", "methods", "agents", "frameworks", mode="before"
    )
    @classmethod
    def _lists(cls, value: Any) -> Any:
        return _listify(value)

    @field_validator("seeds", mode="before")
    @classmethod
    def _seeds(cls, value: Any) -> Any:
        if isinstance(value, int):
            return [value]
        if isinstance(value, str):
            try:
                return parse_seeds(value)
            except UndoBenchError as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("seeds")
    @classmethod
    def _seeds_sorted(cls, value: list[int]) -> list[int]:
        if any(s < 0 for s in value):
            raise ValueError("seeds must be non-negative")
        return sorted(set(value))

    @field_validator("methods")
    @classmethod
    def _known_methods(cls, value: list[str]) -> list[str]:
        known = method_registry.METHODS  # read live: a method registered after import counts
        for m in value:
            if m not in known:
                raise ValueError(f"unknown method {m!r}; choose from {', '.join(known)}")
        return list(dict.fromkeys(value))

    @field_validator("workflows")
    @classmethod
    def _known_workflows(cls, value: list[str] | None) -> list[str] | None:
        for w in value or []:
            try:
                find_workflow(w)
            except KeyError as exc:
                raise ValueError(str(exc)) from None
        return None if value is None else list(dict.fromkeys(value))

    @model_validator(mode="after")
    def _one_selection(self) -> SweepSpec:
        if (self.workflows is None) == (self.split is None):
            raise ValueError("give exactly one of 'workflows' (a list of ids) or 'split'")
        if self.workflows == []:
            raise ValueError("'workflows' is empty")
        return self

    def workflow_ids(self) -> list[str]:
        if self.workflows is not None:
            return self.workflows
        return [w.id for w in all_workflows(self.split)]

    def expand(self) -> list[TrialSpec]:
        """The deterministic list of `runner.TrialSpec`, one per pair."""
        frameworks: list[str | None] = [*self.frameworks] if self.frameworks else [None]
        agents: list[tuple[str | None, str | None]] = [
            (a, f) for a in self.agents for f in frameworks
        ]
        boundaries = [b.value for b in self.boundaries] if self.boundaries else None
        return expand_factorial(
            self.workflow_ids(), self.scenarios, self.methods, self.seeds, agents, boundaries
        )


def _read(path: Path) -> Any:
    suffix = path.suffix.lower()
    text = path.read_text(encoding="utf-8")
    if suffix == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise UndoBenchError(f"{path}: not valid TOML: {exc}") from None
    if suffix in (".yaml", ".yml"):
        from ruamel.yaml import YAML
        from ruamel.yaml.error import YAMLError

        try:
            return YAML(typ="safe").load(text)
        except YAMLError as exc:
            raise UndoBenchError(f"{path}: not valid YAML: {exc}") from None
    raise UndoBenchError(f"{path}: a sweep file ends in .toml, .yaml or .yml")


def _explain(path: Path | None, exc: ValidationError) -> str:
    """Every problem with the key it is about (flags are named as the file keys)."""
    head = f"{path}: invalid sweep file" if path else "invalid run options"
    lines = [f"{head} ({exc.error_count()} problem(s)):"]
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        if path is None and err["loc"]:
            where = _FLAGS.get(str(err["loc"][0]), "--" + str(err["loc"][0]).replace("_", "-"))
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            fields = ", ".join([*SweepSpec.model_fields, *_PLURAL])
            msg = f"unknown key; known keys: {fields}"
        lines.append(f"  {where}: {msg}")
    return "\n".join(lines)


def spec_from_flags(values: dict[str, Any]) -> SweepSpec:
    """The same validation for `run --workflows ... --method ...` as for a sweep file."""
    try:
        return SweepSpec.model_validate(values)
    except ValidationError as exc:
        raise UndoBenchError(_explain(None, exc)) from None


def resolve_execution(spec: SweepSpec, **flags: Any) -> dict[str, Any]:
    """`run_sweep` keyword arguments: a flag that is given wins over the file's
    [execution] table, which wins over the defaults."""
    try:
        cli = Execution.model_validate({k: v for k, v in flags.items() if v is not None})
    except ValidationError as exc:
        raise UndoBenchError(_explain(None, exc)) from None
    file = spec.execution
    address = cli.ray_address or file.ray_address
    return {
        "framework": spec.frameworks[0] if spec.frameworks else None,
        "executor": cli.executor or file.executor or ("ray" if address else "local"),
        "workers": cli.workers or file.workers or 1,
        "lanes": cli.lanes or file.lanes,
        "trial_timeout": cli.trial_timeout or file.trial_timeout or DEFAULT_TRIAL_TIMEOUT_S,
        "retry": RetryPolicy(max_attempts=cli.max_attempts or file.max_attempts or 2),
        "max_stacks": cli.max_stacks or file.max_stacks or DEFAULT_MAX_STACKS,
        "ray_address": address,
    }


def load_sweep(path: str | Path) -> SweepSpec:
    """Parse and validate a sweep file; every problem is reported with its key."""
    p = Path(path)
    if not p.is_file():
        raise UndoBenchError(f"sweep file {p} not found")
    data = _read(p)
    if not isinstance(data, dict):
        raise UndoBenchError(f"{p}: a sweep file is a table of keys (workflows, methods, …)")
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as exc:
        raise UndoBenchError(_explain(p, exc)) from None
