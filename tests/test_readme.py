"""The README is the front door: its counts must be the catalogue's, it stays short, and its
links stay inside the repository and lead somewhere.

Every count of workflows, fault scenarios, domains and methods that the README states with
a number ("60 workflows", "12 TEST workflows", "9 methods", "eight domain services") is
checked against the live catalogue and method registry, so adding a workflow without
updating the README fails here. The quick start's pair count is checked against the
Makefile's `run` target.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from undobench_gym.agents import methods
from undobench_gym.core import catalog

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 220

WORDS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}
NUMBER = r"\b(\d[\d,]*|" + "|".join(WORDS) + r")"
SPLITS = ("dev", "val", "test", "stress")
# "60 workflows", "12 TEST workflows", "136 fault scenarios", "8 domains", "eight domain
# services", "9 methods", "9 recovery methods"; a split word may sit between number and noun.
COUNT = re.compile(
    NUMBER
    + r"\s+(?:(DEV|VAL|TEST|stress)\s+)?(?:recovery\s+)?"
    + r"(workflows?|fault\s+scenarios?|scenarios?|domain\s+services|domains?|methods?)\b",
    re.IGNORECASE,
)
# "14 DEV, 10 VAL and 12 TEST workflows": a split count whose noun comes later.
SPLIT_COUNT = re.compile(r"\b(\d+)\s+(DEV|VAL|TEST|stress)\b(?!\s+(?:workflows?|split))")


def _number(text: str) -> int:
    return WORDS[text.lower()] if text.lower() in WORDS else int(text.replace(",", ""))


@pytest.fixture(scope="module")
def text() -> str:
    return README.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def truth() -> dict[tuple[str, str | None], int]:
    """What each (noun, split) count must be, from the catalogue and the registry."""
    workflows = list(catalog.all_workflows())
    out: dict[tuple[str, str | None], int] = {
        ("workflows", None): len(workflows),
        ("scenarios", None): sum(len(w.scenarios) for w in workflows),
        ("domains", None): len({w.domain for w in workflows}),
        ("methods", None): len(methods.METHODS),
    }
    for split in SPLITS:
        members = [w for w in workflows if str(w.split).lower() == split]
        out["workflows", split] = len(members)
        out["scenarios", split] = sum(len(w.scenarios) for w in members)
        out["domains", split] = len({w.domain for w in members})
        out["methods", split] = len(methods.METHODS)
    return out


def _noun(raw: str) -> str:
    raw = raw.lower()
    if raw.startswith("workflow"):
        return "workflows"
    if "scenario" in raw:
        return "scenarios"
    if raw.startswith("domain"):
        return "domains"
    return "methods"


def test_every_stated_count_matches_the_catalogue(
    text: str, truth: dict[tuple[str, str | None], int]
) -> None:
    stated = [
        (m.group(0), _number(m.group(1)), _noun(m.group(3)), m.group(2))
        for m in COUNT.finditer(text)
    ]
    wrong = [
        f"{phrase!r}: the catalogue has {truth[noun, split.lower() if split else None]}"
        for phrase, n, noun, split in stated
        if n != truth[noun, split.lower() if split else None]
    ]
    assert not wrong, "README counts out of date:\n" + "\n".join(wrong)
    # the headline counts are stated at all
    for key in [("workflows", None), ("scenarios", None), ("domains", None), ("methods", None)]:
        assert any((noun, None) == key and n == truth[key] for _, n, noun, split in stated), (
            f"README never states the number of {key[0]} ({truth[key]})"
        )


def test_split_counts_match_the_catalogue(
    text: str, truth: dict[tuple[str, str | None], int]
) -> None:
    wrong = [
        f"{m.group(0)!r}: the {m.group(2)} split has {truth['workflows', m.group(2).lower()]}"
        " workflows"
        for m in SPLIT_COUNT.finditer(text)
        if int(m.group(1)) != truth["workflows", m.group(2).lower()]
    ]
    assert not wrong, "README split counts out of date:\n" + "\n".join(wrong)


def test_quick_start_pair_count_matches_the_makefile(text: str) -> None:
    target = re.search(r"^run:.*?\n((?:\t.*\n?)+)", (ROOT / "Makefile").read_text(), re.M)
    assert target, "no run target in the Makefile"
    recipe = target.group(1).replace("\\\n", " ")
    wanted = re.search(r"--workflows\s+(\S+)", recipe)
    method = re.search(r"--method\s+(\S+)", recipe)
    seeds = re.search(r"--seeds\s+(\d+)-(\d+)", recipe)
    assert wanted and method and seeds, recipe
    by_id = {w.id: w for w in catalog.all_workflows()}
    scenarios = sum(len(by_id[w].scenarios) for w in wanted.group(1).split(","))
    n_seeds = int(seeds.group(2)) - int(seeds.group(1)) + 1
    pairs = scenarios * len(method.group(1).split(",")) * n_seeds
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    # the run's size is stated in parentheses: "(108 pairs, about a minute)"
    stated = [int(n.replace(",", "")) for n in re.findall(r"\((\d[\d,]*) pairs", quick)]
    assert stated, "the quick start no longer says how many pairs `make run` makes"
    assert stated == [pairs] * len(stated), f"make run makes {pairs} pairs; README: {stated}"


def test_readme_is_short(text: str) -> None:
    lines = len(text.splitlines())
    assert lines <= MAX_LINES, f"README.md has {lines} lines; keep it under {MAX_LINES}"


def test_links_stay_in_the_repository_and_resolve(text: str) -> None:
    targets = re.findall(r"\]\(\s*<?([^)\s>]+)", text) + re.findall(r"<(\.\.?/[^>]+)>", text)
    outside = [t for t in targets if t.startswith("../")]
    assert not outside, f"links that leave the repository: {outside}"
    missing = [
        t
        for t in targets
        if not re.match(r"[a-z]+:", t)
        and not t.startswith("#")
        and not (ROOT / t.split("#", 1)[0]).exists()
    ]
    assert not missing, f"links to files that do not exist: {missing}"
