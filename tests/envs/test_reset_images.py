"""Resets that copy a seed's SQLite image, and git's caches of immutable objects, give the
same states as building them: faster must not mean different."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from undobench_gym.core.catalog import all_workflows
from undobench_gym.services.domains.git import repos as git_repos
from undobench_gym.services.domains.git import views as git_views
from undobench_gym.services.domains.git.repos import Repo, snapshot
from undobench_gym.services.domains.git.service import DOMAIN as GIT

from .service_harness import ServiceClient, params_for, run_gold_plan
from .test_payments_service import DOMAIN as PAYMENTS

DOMAINS = sorted({wf.domain for wf in all_workflows()})


def _service(name: str) -> Any:
    from undobench_gym.services.domains._service.server import load_domain

    return load_domain(name)


@pytest.mark.parametrize("name", DOMAINS)
def test_a_restored_seed_is_the_built_seed(name: str, tmp_path: Path) -> None:
    """Build seeds 5 and 6, dirty the state with a workflow's gold plan, then reset to each
    again from its image: the hash is the built one, and a build without images agrees."""
    with ServiceClient.open(_service(name), tmp_path) as svc:
        built = {seed: svc.reset(seed) for seed in (5, 6)}
        assert len(svc.ctx.pristine) >= 2
        wf = next(w for w in all_workflows() if w.domain == name)
        run_gold_plan(svc, wf, params_for(wf, 6))
        assert svc.state()["hash"] != built[6]
        for seed in (5, 6, 5):
            assert svc.reset(seed) == built[seed]
            assert svc.commit_log() == []
        svc.ctx.pristine.clear()
        assert svc.reset(6) == built[6]


def test_a_restore_drops_what_the_episode_added_to_the_schema(tmp_path: Path) -> None:
    """The database domain's migrations create tables: a restored image has none."""

    def ext_tables(svc: ServiceClient) -> list[str]:
        with svc.ctx.engine.connect() as conn:
            names = conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'table'")
            return [n for (n,) in names if n.startswith("ext_")]

    with ServiceClient.open(_service("database"), tmp_path) as svc:
        fresh = svc.reset(4)
        seeded = ext_tables(svc)
        wf = svc.workflow("db-apply-migration")
        run_gold_plan(svc, wf, params_for(wf, 4))
        assert len(ext_tables(svc)) > len(seeded)
        assert svc.reset(4) == fresh
        assert ext_tables(svc) == seeded


def test_changing_the_configuration_drops_the_images(tmp_path: Path) -> None:
    """An image holds the persisted configuration: a restore must not bring an old one back
    (a crashed server reads it from the file when it starts again)."""
    with ServiceClient.open(PAYMENTS, tmp_path) as svc:
        svc.reset(3)
        assert len(svc.ctx.pristine) == 1
        svc.configure(idempotency_mode="all")
        assert len(svc.ctx.pristine) == 0
        svc.reset(3)
        svc.ctx.idempotency_mode = "native"  # what a new process would hold before...
        svc.ctx.load_config()  # ...it reads the file
        assert svc.ctx.idempotency_mode == "all"


def test_git_snapshots_come_from_the_cache_only_for_the_same_refs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ServiceClient.open(GIT, tmp_path) as svc:
        name = next(iter(svc.state()["extra"]["repos"]))
        r = Repo(svc.ctx.data_dir, name)
        first = snapshot(r)
        reads: list[str] = []
        real = git_repos._read_snapshot

        def counted(repo: Repo, refs: dict[str, str]) -> Any:
            reads.append(repo.name)
            return real(repo, refs)

        monkeypatch.setattr(git_repos, "_read_snapshot", counted)
        assert snapshot(r) == first and reads == []  # the same refs: no git process
        tip = r.refs()["refs/heads/main"]
        r.git("update-ref", "refs/heads/cache-test", tip)
        moved = snapshot(r)
        assert reads == [name]
        assert moved == real(r, r.refs())[0] and moved != first


def test_a_commit_view_from_the_cache_needs_the_commit_present(tmp_path: Path) -> None:
    """A commit an episode wrote is gone after the reset: asked without `present`, the
    view is read from the repository (404), not from the cache."""
    with ServiceClient.open(GIT, tmp_path) as svc:
        wf = svc.workflow("git-merge-feature")
        params = params_for(wf)
        results = run_gold_plan(svc, wf, params)
        written = next(
            b["sha"] for b in results if isinstance(b, dict) and isinstance(b.get("sha"), str)
        )
        name = params["repo"]
        r = Repo(svc.ctx.data_dir, name)
        assert git_views.commit_view(r, written, present=True)["sha"] == written
        svc.reset()
        with pytest.raises(Exception, match="No commit"):
            git_views.commit_view(r, written)


def test_a_git_reset_copies_only_the_repositories_that_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from undobench_gym.services.domains.git import seeding

    copied: list[str] = []
    real = seeding._copy_repository

    def counted(cache: Path, root: Path, name: str) -> None:
        copied.append(name)
        real(cache, root, name)

    monkeypatch.setattr(seeding, "_copy_repository", counted)
    with ServiceClient.open(GIT, tmp_path) as svc:
        fresh = svc.reset()
        names = sorted(svc.state()["extra"]["repos"])
        assert svc.reset() == fresh and copied == []  # nothing changed: nothing copied
        wf = svc.workflow("git-cut-release")
        params = params_for(wf)
        run_gold_plan(svc, wf, params)
        assert svc.reset() == fresh and copied == [params["repo"]]
        copied.clear()
        other = next(n for n in names if n != params["repo"])
        (Repo(svc.ctx.data_dir, other).git_dir / "index.lock").write_text("")  # not via git
        assert svc.reset() == fresh and copied == [other]
        svc.reset(svc.seed + 1)  # built: another seed's repositories
        copied.clear()
        assert svc.reset() == fresh and sorted(copied) == names  # none of them is this seed's
