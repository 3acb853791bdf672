"""The seeded repositories: a pure function of the seed.

`build_fixture(seed)` describes three small repositories commit by commit, with every
object id computed in Python (`objects`), plus the rows the service's SQLite mirror of
the refs and files holds right after a reset. `repos.seed_repositories` writes the same
history to disk with `git fast-import`; the tests check both agree.

Every repository has the same shape, so any workflow can run on any of them:

    main:    c1 Initial commit - c2 docs (tag v1.M.0) - c3 timeout - c4 fix - c5 debug logging
    feature/<slug>:                              c3 - f1 module - f2 tests
"""

from __future__ import annotations

from typing import Any

from undobench_gym.seeding import rng_for

from .objects import blob_id, commit_id, tag_id, tree_id

#: 2026-01-01T00:00:00Z, the virtual clock's epoch: seeded history lies before it.
EPOCH_TS = 1767225600
REPO_POOL = [
    ("payments-api", "Payment processing API"),
    ("web-storefront", "Customer-facing web shop"),
    ("infra-config", "Shared infrastructure configuration"),
    ("search-service", "Product search backend"),
    ("auth-gateway", "Login and token gateway"),
    ("mobile-backend", "Backend for the mobile apps"),
]
PEOPLE = [
    ("Ada Lovelace", "ada@example.com"),
    ("Grace Hopper", "grace@example.com"),
    ("Linus Torvalds", "linus@example.com"),
    ("Barbara Liskov", "barbara@example.com"),
    ("Ken Thompson", "ken@example.com"),
    ("Radia Perlman", "radia@example.com"),
]
FIXES = [
    ("Fix off-by-one in pagination", "    page = request.page", "    page = max(request.page, 1)"),
    (
        "Fix timezone handling in reports",
        "    stamp = request.time",
        "    stamp = to_utc(request.time)",
    ),
    (
        "Fix rounding of refund amounts",
        "    amount = request.amount",
        "    amount = round_cents(request.amount)",
    ),
    ("Fix thundering herd on upstream timeouts", "    backoff = 0", "    backoff = jitter(2)"),
    (
        "Fix crash on empty search query",
        "    query = request.query",
        "    query = request.query or ''",
    ),
]
FEATURES = [
    ("bulk-export", "Bulk export"),
    ("saved-searches", "Saved searches"),
    ("webhook-retries", "Webhook retries"),
    ("audit-trail", "Audit trail"),
    ("rate-cards", "Rate cards"),
    ("gift-wrapping", "Gift wrapping"),
]
DEBUG_SUBJECT = "Enable debug logging in production"
REPOS_PER_SEED = 3


def _app(description: str, line: str) -> str:
    return (
        f'"""{description}: request handler."""\n\n\n'
        f"def handle(request):\n{line}\n    return respond(request)\n"
    )


def _settings(name: str, level: str, workers: int, timeout: int | None) -> str:
    text = f"[service]\nname = {name}\nlog_level = {level}\nworkers = {workers}\n"
    return text + (f"request_timeout = {timeout}\n" if timeout is not None else "")


def _history(seed: int, index: int, name: str, description: str) -> dict[str, Any]:
    rng = rng_for("git-fixture", seed, name)
    minor = rng.randint(2, 9)
    fix_subject, old_line, new_line = rng.choice(FIXES)
    slug, title = rng.choice(FEATURES)
    module = slug.replace("-", "_")
    workers, timeout = rng.randint(2, 16), rng.choice([10, 15, 30, 60])
    rpm = rng.choice([300, 600, 1200])
    version = f"1.{minor}.0"
    t0 = EPOCH_TS - 40 * 86400 + index * 3600
    steps: list[tuple[str, str, str | None, str, dict[str, str]]] = [
        # (key, branch it extends, parent key, message, changed files)
        (
            "c1",
            "main",
            None,
            "Initial commit\n",
            {
                "README.md": f"# {name}\n\n{description}.\n",
                "VERSION": f"{version}\n",
                "CHANGELOG.md": f"# Changelog\n\n## {version}\n\n- First release of {name}.\n",
                "src/app.py": _app(description, old_line),
                "config/settings.ini": _settings(name, "info", workers, None),
                "config/rate_limit.conf": f"requests_per_minute = {rpm}\n",
            },
        ),
        (
            "c2",
            "main",
            "c1",
            "Document deployment steps\n",
            {
                "README.md": f"# {name}\n\n{description}.\n\n"
                "## Deploying\n\nRun `make deploy` from a clean checkout.\n"
            },
        ),
        (
            "c3",
            "main",
            "c2",
            "Add request timeout setting\n",
            {"config/settings.ini": _settings(name, "info", workers, timeout)},
        ),
        (
            "f1",
            f"feature/{slug}",
            "c3",
            f"Add {title.lower()} module\n",
            {f"src/{module}.py": f'"""{title}."""\n\n\ndef enabled():\n    return True\n'},
        ),
        (
            "f2",
            f"feature/{slug}",
            "f1",
            f"Add tests for {title.lower()}\n",
            {
                f"tests/test_{module}.py": f"from src.{module} import enabled\n\n\n"
                "def test_enabled():\n    assert enabled()\n"
            },
        ),
        ("c4", "main", "c3", f"{fix_subject}\n", {"src/app.py": _app(description, new_line)}),
        (
            "c5",
            "main",
            "c4",
            f"{DEBUG_SUBJECT}\n\nTemporary, to chase a latency spike.\n",
            {"config/settings.ini": _settings(name, "debug", workers, timeout)},
        ),
    ]
    commits: list[dict[str, Any]] = []
    by_key: dict[str, dict[str, Any]] = {}
    for i, (key, branch, parent, message, changes) in enumerate(steps):
        files = dict(by_key[parent]["files"]) if parent else {}
        files.update(changes)
        author = rng.choice(PEOPLE)
        when = t0 + i * 86400 + rng.randint(0, 3599)
        parents = [by_key[parent]["sha"]] if parent else []
        commit = {
            "key": key,
            "branch": branch,
            "parent": parent,
            "author": list(author),
            "time": when,
            "message": message,
            "subject": message.split("\n", 1)[0],
            "changes": changes,
            "files": files,
            "sha": commit_id(tree_id(files), parents, author, when, message),
        }
        commits.append(commit)
        by_key[key] = commit
    tagger = rng.choice(PEOPLE)
    tag_time = by_key["c2"]["time"] + 600
    tag_message = f"Release {version}\n"
    tag = {
        "name": f"v{version}",
        "target": "c2",
        "tagger": list(tagger),
        "time": tag_time,
        "message": tag_message,
        "sha": tag_id(by_key["c2"]["sha"], f"v{version}", tagger, tag_time, tag_message),
    }
    return {
        "name": name,
        "description": description,
        "minor": minor,
        "version": version,
        "slug": slug,
        "feature_title": title,
        "feature_branch": f"feature/{slug}",
        "fix_subject": fix_subject,
        "settings_before_debug": by_key["c4"]["files"]["config/settings.ini"],
        "commits": commits,
        "branches": {"main": "c5", f"feature/{slug}": "f2"},
        "tags": [tag],
    }


def changelog_with(current: str | None, version: str, notes: str) -> str:
    """CHANGELOG.md with a section for `version` on top (what a release commits)."""
    header = "# Changelog\n\n"
    rest = (current or header).removeprefix(header)
    return f"{header}## {version}\n\n{notes}\n\n{rest}"


def commit(history: dict[str, Any], key: str) -> dict[str, Any]:
    return next(c for c in history["commits"] if c["key"] == key)


def depth(history: dict[str, Any], key: str) -> int:
    """Number of commits reachable from `key` (the seeded history is linear per branch)."""
    n, cur = 0, commit(history, key)
    while True:
        n += 1
        if cur["parent"] is None:
            return n
        cur = commit(history, cur["parent"])


def _mirror(history: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The git_refs and git_files rows of a freshly seeded repository."""
    name = history["name"]
    refs, files = [], []
    targets: list[tuple[str, str, str, dict[str, Any]]] = [
        (f"refs/heads/{b}", "branch", b, {"key": key}) for b, key in history["branches"].items()
    ]
    targets += [
        (f"refs/tags/{t['name']}", "tag", t["name"], {"key": t["target"], **t})
        for t in history["tags"]
    ]
    for ref, kind, short, info in targets:
        c = commit(history, info["key"])
        annotated = kind == "tag"
        refs.append(
            {
                "repo": name,
                "ref": ref,
                "kind": kind,
                "name": short,
                "sha": c["sha"],
                "subject": c["subject"],
                "depth": depth(history, info["key"]),
                "tag_object": info["sha"] if annotated else None,
                "tag_message": info["message"] if annotated else None,
            }
        )
        for path, content in c["files"].items():
            files.append(
                {
                    "repo": name,
                    "ref": ref,
                    "path": path,
                    "blob": blob_id(content),
                    "size": len(content.encode()),
                    "content": content,
                }
            )
    return refs, files


def build_fixture(seed: int) -> dict[str, list[dict[str, Any]]]:
    rng = rng_for("git-fixture-repos", seed)
    chosen = rng.sample(REPO_POOL, REPOS_PER_SEED)
    histories = [_history(seed, i, n, d) for i, (n, d) in enumerate(chosen)]
    repos, refs, files = [], [], []
    for h in histories:
        repos.append(
            {
                "name": h["name"],
                "description": h["description"],
                "default_branch": "main",
                "created": "2025-11-22T00:00:00Z",
            }
        )
        r, f = _mirror(h)
        refs += r
        files += f
    key = lambda r: (r["repo"], r["ref"], r.get("path", ""))  # noqa: E731
    return {
        "repos": sorted(repos, key=lambda r: r["name"]),
        "refs": sorted(refs, key=key),
        "files": sorted(files, key=key),
        "history": sorted(histories, key=lambda h: h["name"]),
    }
