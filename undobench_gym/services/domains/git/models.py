"""Git service tables (SQLAlchemy 2.0 declarative).

The repositories on disk are the state; SQLite holds what the service did (commits it
wrote, releases) and a mirror of every repository's refs and of the files at each ref,
rebuilt from disk by the same transaction that writes a mutation's commit-log row, so
the oracles can check values (file contents, commit counts) on plain rows.
"""

from __future__ import annotations

from sqlalchemy import JSON, Integer, String, Table, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from undobench_gym.services.domains._service.kit import Base


class Repository(Base):
    __tablename__ = "git_repos"
    name: Mapped[str] = mapped_column(String(40), primary_key=True)
    description: Mapped[str] = mapped_column(String(200))
    default_branch: Mapped[str] = mapped_column(String(100))
    created: Mapped[str] = mapped_column(String(32))


class Ref(Base):
    """Mirror of one ref: the commit it points to (tags peeled), that commit's subject and
    the number of commits reachable from it."""

    __tablename__ = "git_refs"
    repo: Mapped[str] = mapped_column(String(40), primary_key=True)
    ref: Mapped[str] = mapped_column(String(120), primary_key=True)
    kind: Mapped[str] = mapped_column(String(8))  # branch | tag
    name: Mapped[str] = mapped_column(String(100))
    sha: Mapped[str] = mapped_column(String(40))
    subject: Mapped[str] = mapped_column(Text)
    depth: Mapped[int] = mapped_column(Integer)
    tag_object: Mapped[str | None] = mapped_column(String(40), nullable=True)
    tag_message: Mapped[str | None] = mapped_column(Text, nullable=True)


class File(Base):
    """Mirror of one file in the tree of one ref's commit."""

    __tablename__ = "git_files"
    repo: Mapped[str] = mapped_column(String(40), primary_key=True)
    ref: Mapped[str] = mapped_column(String(120), primary_key=True)
    path: Mapped[str] = mapped_column(String(200), primary_key=True)
    blob: Mapped[str] = mapped_column(String(40))
    size: Mapped[int] = mapped_column(Integer)
    content: Mapped[str | None] = mapped_column(Text, nullable=True)


class CommitRecord(Base):
    """A commit the service wrote: by commit_file, merge, cherry-pick, revert or a release."""

    __tablename__ = "git_commits"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    repo: Mapped[str] = mapped_column(String(40))
    branch: Mapped[str] = mapped_column(String(100))
    sha: Mapped[str] = mapped_column(String(40))
    parents: Mapped[list[str]] = mapped_column(JSON)
    kind: Mapped[str] = mapped_column(String(16))  # commit|merge|cherry_pick|revert|release
    message: Mapped[str] = mapped_column(Text)
    path: Mapped[str | None] = mapped_column(String(200), nullable=True)
    source: Mapped[str | None] = mapped_column(String(40), nullable=True)
    created: Mapped[str] = mapped_column(String(32))


class Release(Base):
    """A release cut in steps: started -> branch_created -> version_bumped -> tagged ->
    complete."""

    __tablename__ = "git_releases"
    __table_args__ = (UniqueConstraint("repo", "version"),)
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    repo: Mapped[str] = mapped_column(String(40))
    version: Mapped[str] = mapped_column(String(32))
    branch: Mapped[str] = mapped_column(String(100))
    tag: Mapped[str] = mapped_column(String(100))
    status: Mapped[str] = mapped_column(String(16))
    base_sha: Mapped[str] = mapped_column(String(40))
    bump_sha: Mapped[str | None] = mapped_column(String(40), nullable=True)
    tag_object: Mapped[str | None] = mapped_column(String(40), nullable=True)
    notes_sha: Mapped[str | None] = mapped_column(String(40), nullable=True)
    notes: Mapped[str] = mapped_column(Text)
    created: Mapped[str] = mapped_column(String(32))
    updated: Mapped[str] = mapped_column(String(32))


TABLES: list[Table] = [
    Base.metadata.tables[m.__tablename__] for m in (Repository, Ref, File, CommitRecord, Release)
]
