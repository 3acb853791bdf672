"""What the git workflows share: oracle helpers over the mirror tables.

The oracles read the mirror tables: the content of files at a ref, the subject of a
ref's tip and the number of commits reachable from it (`depth`), an exact value from the
fixture, so a commit made twice makes an invariant false. Counts over the service's own
records (`git_commits`, `git_releases`) are keyed by structured fields (repository,
branch, path, kind, source commit, version), never by a message, and expect the number
the fixture already holds plus what the task adds, so history cannot stand in for the
task's effect.
"""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.seeding import rng_for
from undobench_gym.contract.specs import (
    Boundary,
    EffectExpectation,
    StatePredicate,
)

B = Boundary
E = EffectExpectation
P = StatePredicate
MAIN = "refs/heads/main"


def repo_for(wf_id: str, seed: int, fx: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    rng = rng_for(wf_id, seed)
    return rng, rng.choice(fx["history"])


def file_is(description: str, ref: str, path: str, value: str) -> P:
    """The content of `path` at `ref` of the task's repository."""
    where = {"repo": "{repo}", "ref": ref, "path": path}
    return P.field_is(description, "git_files", where, "content", value)


def ref_is(description: str, ref: str, field: str, value: Any) -> P:
    """A field of the mirror row of `ref` of the task's repository."""
    return P.field_is(description, "git_refs", {"repo": "{repo}", "ref": ref}, field, value)


def seeded(fx: dict[str, Any], table: str, **where: Any) -> int:
    """How many rows of the fixture's `commits` or `releases` match `where`."""
    return sum(1 for r in fx[table] if all(r.get(k) == v for k, v in where.items()))
