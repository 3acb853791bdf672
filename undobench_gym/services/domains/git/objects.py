"""Git object ids computed in Python, so the fixture knows every seeded commit's hash
without running git (the tests check that git computes the same ones)."""

from __future__ import annotations

import hashlib
from typing import Any

FILE_MODE = "100644"
TREE_MODE = "40000"


def object_id(kind: str, body: bytes) -> str:
    return hashlib.sha1(f"{kind} {len(body)}\0".encode() + body, usedforsecurity=False).hexdigest()


def blob_id(content: str) -> str:
    return object_id("blob", content.encode())


def tree_id(files: dict[str, str]) -> str:
    """The id of the tree holding `files` (path -> text content; paths use '/')."""
    nested: dict[str, Any] = {}
    for path, content in files.items():
        node = nested
        *dirs, leaf = path.split("/")
        for d in dirs:
            node = node.setdefault(d, {})
        node[leaf] = content
    return _tree(nested)


def _tree(node: dict[str, Any]) -> str:
    entries = []
    for name, value in node.items():
        if isinstance(value, dict):
            entries.append((name + "/", TREE_MODE, name, _tree(value)))
        else:
            entries.append((name, FILE_MODE, name, blob_id(value)))
    entries.sort(key=lambda e: e[0].encode())
    body = b"".join(
        f"{mode} {name}".encode() + b"\0" + bytes.fromhex(oid) for _, mode, name, oid in entries
    )
    return object_id("tree", body)


def signature(person: tuple[str, str], when: int) -> str:
    return f"{person[0]} <{person[1]}> {when} +0000"


def commit_id(
    tree: str, parents: list[str], author: tuple[str, str], when: int, message: str
) -> str:
    lines = [f"tree {tree}", *(f"parent {p}" for p in parents)]
    lines += [f"author {signature(author, when)}", f"committer {signature(author, when)}"]
    return object_id("commit", ("\n".join(lines) + "\n\n" + message).encode())


def tag_id(target: str, name: str, tagger: tuple[str, str], when: int, message: str) -> str:
    head = f"object {target}\ntype commit\ntag {name}\ntagger {signature(tagger, when)}\n"
    return object_id("tag", (head + "\n" + message).encode())
