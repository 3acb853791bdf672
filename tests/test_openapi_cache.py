"""The OpenAPI documents kept between processes: the same tools as a live render, read
back only for the sources they came from, and a client that loads a domain from one
imports no service code."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from undobench_gym.core import catalog, openapi_cache

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(openapi_cache.ENV_VAR, raising=False)
    return tmp_path / "undobench" / "openapi"


def _tools(doc: dict[str, object]) -> list[dict[str, object]]:
    return [dataclasses.asdict(t) for t in catalog.tools_from_openapi(doc).values()]  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(catalog.DOMAINS))
def test_a_kept_document_builds_the_same_tools_as_a_live_render(cache: Path, name: str) -> None:
    module = catalog.DOMAINS[name]
    live = catalog.render_openapi(module)
    assert openapi_cache.load(name, module) is None
    openapi_cache.save(name, module, live)
    kept = openapi_cache.load(name, module)
    assert kept == live
    assert kept is not None and _tools(kept) == _tools(live)
    assert [p.name for p in cache.iterdir()] == [
        f"{name}-{openapi_cache.source_key(name, module)[:32]}.json"
    ]  # type: ignore[index]


def test_a_document_is_read_back_only_under_its_own_key(cache: Path) -> None:
    module = catalog.DOMAINS["payments"]
    openapi_cache.save("payments", module, {"openapi": "3.1.0", "paths": {}})
    (path,) = cache.iterdir()
    kept = json.loads(path.read_text())
    kept["key"] = "0" * 64  # written for other sources: same file name, another key
    path.write_text(json.dumps(kept))
    assert openapi_cache.load("payments", module) is None
    path.write_text("{not json")
    assert openapi_cache.load("payments", module) is None


def test_an_edited_service_or_another_fastapi_changes_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "undobench_gym"
    for part in ("services/domains/git", "services/domains/_service", "contract"):
        shutil.copytree(ROOT / "undobench_gym" / part, package / part)
    for top in (ROOT / "undobench_gym/services/domains").glob("*.py"):
        shutil.copy(top, package / "services/domains" / top.name)
    monkeypatch.setattr(openapi_cache, "_PACKAGE", package)
    monkeypatch.setattr(openapi_cache, "_DOMAINS", package / "services/domains")
    module = catalog.DOMAINS["git"]

    def key() -> str | None:
        openapi_cache.source_key.cache_clear()
        return openapi_cache.source_key("git", module)

    try:
        first = key()
        assert first is not None and first == key()
        service = package / "services/domains/git/service.py"
        service.write_text(service.read_text() + "\n# an edit\n")
        edited = key()
        assert edited not in (None, first)
        kit = package / "services/domains/_service/app.py"
        kit.write_text(kit.read_text() + "\n# an edit\n")
        assert key() not in (None, first, edited)
        versions = {"fastapi": "0.0.1"}
        real = openapi_cache.metadata.version
        monkeypatch.setattr(
            openapi_cache.metadata, "version", lambda lib: versions.get(lib) or real(lib)
        )
        assert key() not in (None, first, edited)
    finally:
        openapi_cache.source_key.cache_clear()


def test_a_new_document_replaces_the_one_of_older_sources(cache: Path) -> None:
    module = catalog.DOMAINS["git"]
    cache.mkdir(parents=True)
    older = cache / f"git-{'0' * 32}.json"
    older.write_text('{"key": "older", "openapi": {}}')
    other_domain = cache / f"cloud-{'0' * 32}.json"
    other_domain.write_text('{"key": "older", "openapi": {}}')
    openapi_cache.save("git", module, {"paths": {}})
    assert not older.exists() and other_domain.exists()
    assert openapi_cache.load("git", module) == {"paths": {}}


def test_a_domain_from_another_package_is_always_rendered_live(cache: Path) -> None:
    assert openapi_cache.source_key("notes", "tests.tiny_domain") is None
    # a built-in name pointed at another module (UNDOBENCH_DOMAINS) is not the built-in
    assert openapi_cache.source_key("git", "tests.tiny_domain") is None
    openapi_cache.save("notes", "tests.tiny_domain", {"paths": {}})
    assert not cache.exists()


def test_the_cache_can_be_turned_off(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(openapi_cache.ENV_VAR, "0")
    module = catalog.DOMAINS["crm"]
    openapi_cache.save("crm", module, catalog.render_openapi(module))
    assert not cache.exists()
    assert openapi_cache.load("crm", module) is None


def test_an_unwritable_cache_costs_only_the_render(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # a file where a folder should be
    module = catalog.DOMAINS["storage"]
    openapi_cache.save("storage", module, {"paths": {}})  # no error
    assert openapi_cache.load("storage", module) is None


LOAD = """
import sys
from undobench_gym.core import catalog
d = catalog.domain(sys.argv[1])
print(len(d.tools), sorted(m for m in ("fastapi", "sqlalchemy", "starlette") if m in sys.modules))
"""


def test_a_second_process_loads_a_domain_without_importing_its_service(cache: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache.parents[1])}

    def load() -> str:
        out = subprocess.run(
            [sys.executable, "-c", LOAD, "git"], env=env, capture_output=True, text=True, check=True
        )
        return out.stdout.strip()

    rendered = load()
    assert rendered.endswith("['fastapi', 'sqlalchemy', 'starlette']"), rendered
    kept = load()
    assert kept == rendered.split(" ", 1)[0] + " []", kept
