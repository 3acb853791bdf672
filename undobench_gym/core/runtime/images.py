"""Build the stack image offline: a debootstrap base, host-built wheels, content-hashed tags.

    undobench images build [--base IMAGE | --offline]

Three cached layers, each rebuilt only when its inputs change: the base image (an
existing local image such as python:3.11-slim, or a Debian bookworm made with
`debootstrap --variant=minbase` and `docker import`), the dependency wheelhouse (keyed by
the declared dependencies), and the app wheel. The image tag is a hash of the Dockerfile,
every wheel and the base image id, so an unchanged tree is not rebuilt.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import undobench_gym
from undobench_gym.contract.errors import UndoBenchError

IMAGE_REPO = "undobench/stack"
OFFLINE_BASE = "undobench/base:bookworm"
PUBLIC_BASE = "python:3.11-slim"
LABEL = "io.undobench.project"
PROJECT = "undobench-gym"
DEBIAN_PACKAGES = "python3,python3-venv,python3-pip,git,ca-certificates,passwd"
#: Left out of the imported base: apt's downloaded packages and lists (debootstrap keeps
#: them), documentation, manual pages and translations. No stack process reads them.
SLIM_OUT = (
    "var/cache/apt/archives/",
    "var/lib/apt/lists/",
    "usr/share/doc/",
    "usr/share/man/",
    "usr/share/locale/",
    "usr/share/info/",
)


def _slim(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
    name = member.name.removeprefix("./")
    keep_dir = any(name == prefix.rstrip("/") for prefix in SLIM_OUT)  # the folder, empty
    return member if keep_dir or not name.startswith(SLIM_OUT) else None


def cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "undobench"


def project_root() -> Path:
    """The source tree to build the app wheel from (an editable install's checkout)."""
    here = Path(undobench_gym.__file__).resolve().parents[1]
    if (here / "pyproject.toml").exists():
        return here
    raise UndoBenchError(
        "`undobench images build` needs the source checkout (pyproject.toml); "
        "run it from an editable install (`pip install -e .`)"
    )


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _run(cmd: list[str], what: str, log: Callable[[str], None]) -> None:
    log(f"{what}: {' '.join(cmd[:4])} …")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
        raise UndoBenchError(f"{what} failed (exit {proc.returncode}):\n{tail}")


def docker_client() -> Any:
    try:
        import docker
    except ImportError as exc:
        raise UndoBenchError(
            "the docker runtime needs the docker extra: pip install 'undobench-gym[docker]'"
        ) from exc
    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:
        raise UndoBenchError(
            f"no Docker engine answers ({exc}). Install one (Debian: apt-get install "
            "docker.io) and start it (dockerd &), or use --runtime process"
        ) from exc
    return client


@dataclass
class BuildResult:
    tag: str
    base: str
    built: bool


def offline_base(client: Any, log: Callable[[str], None]) -> str:
    """Debian bookworm minbase with python3 and git, imported as a local image."""
    key = hashlib.sha256(DEBIAN_PACKAGES.encode()).hexdigest()[:12]
    slim = hashlib.sha256("\n".join([DEBIAN_PACKAGES, *SLIM_OUT]).encode()).hexdigest()[:12]
    tag = f"{OFFLINE_BASE}-{slim}"
    if client.images.list(name=tag):
        return tag
    if shutil.which("debootstrap") is None:
        raise UndoBenchError(
            "no local base image and no debootstrap: apt-get install "
            "debootstrap, or pass --base IMAGE (e.g. python:3.11-slim)"
        )
    rootfs = cache_dir() / f"rootfs-{key}"
    if not (rootfs / "usr/bin/python3").exists():
        shutil.rmtree(rootfs, ignore_errors=True)
        rootfs.parent.mkdir(parents=True, exist_ok=True)
        _run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={DEBIAN_PACKAGES}",
                "bookworm",
                str(rootfs),
            ],
            "debootstrap",
            log,
        )
    log(f"docker import {tag}")
    tarball = rootfs.with_suffix(".tar")
    with tarfile.open(tarball, mode="w") as tar:
        tar.add(rootfs, arcname=".", filter=_slim)
    repository, _, version = tag.partition(":")
    client.api.import_image(
        src=str(tarball), repository=repository, tag=version, changes=[f"LABEL {LABEL}={PROJECT}"]
    )
    tarball.unlink()
    return tag


def pick_base(client: Any, base: str | None, offline: bool, log: Callable[[str], None]) -> str:
    """Never pulls implicitly: a registry may be unreachable, and a pull would hang on it."""
    if base and not offline:
        if not client.images.list(name=base):
            log(f"pulling {base}")
            client.images.pull(base)
        return base
    if not offline and client.images.list(name=PUBLIC_BASE):
        return PUBLIC_BASE
    return offline_base(client, log)


def _deps_key(root: Path) -> str:
    data = tomllib.loads((root / "pyproject.toml").read_text())
    deps = sorted(data["project"]["dependencies"])
    return hashlib.sha256("\n".join([sys.version.split()[0], *deps]).encode()).hexdigest()[:16]


def build_wheelhouse(root: Path, context: Path, log: Callable[[str], None]) -> None:
    deps, app = context / "wheelhouse" / "deps", context / "wheelhouse" / "app"
    key = _deps_key(root)
    if (deps / ".key").exists() and (deps / ".key").read_text() == key:
        log("dependency wheels: cached")
    else:
        shutil.rmtree(deps, ignore_errors=True)
        deps.mkdir(parents=True)
        _run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(deps), str(root)],
            "pip wheel (dependencies)",
            log,
        )
        for whl in deps.glob("undobench_gym-*.whl"):
            whl.unlink()
        (deps / ".key").write_text(key)
    shutil.rmtree(app, ignore_errors=True)
    app.mkdir(parents=True)
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--wheel-dir",
            str(app),
            str(root),
        ],
        "pip wheel (undobench-gym)",
        log,
    )


def _context_hash(context: Path, base_id: str) -> str:
    h = hashlib.sha256(base_id.encode())
    for path in sorted(context.rglob("*")):
        if path.is_file() and path.name != ".key":
            h.update(str(path.relative_to(context)).encode())
            # A wheel's bytes embed build timestamps: hash what it contains instead.
            h.update(
                _wheel_digest(path).encode() if path.suffix == ".whl" else _sha256(path).encode()
            )
    return h.hexdigest()[:12]


def _wheel_digest(path: Path) -> str:
    import zipfile

    h = hashlib.sha256()
    with zipfile.ZipFile(path) as z:
        for info in sorted(z.infolist(), key=lambda i: i.filename):
            h.update(info.filename.encode())
            h.update(z.read(info.filename))
    return h.hexdigest()


def build(
    base: str | None = None,
    offline: bool = False,
    force: bool = False,
    log: Callable[[str], None] = print,
) -> BuildResult:
    client = docker_client()
    root = project_root()
    context = root / "build" / "images"
    context.mkdir(parents=True, exist_ok=True)
    dockerfile = importlib.resources.files("undobench_gym.services.images") / "Dockerfile"
    (context / "Dockerfile").write_text(dockerfile.read_text())
    base_tag = pick_base(client, base, offline, log)
    build_wheelhouse(root, context, log)
    base_id = client.images.get(base_tag).id
    tag = f"{IMAGE_REPO}:{_context_hash(context, base_id)}"
    if client.images.list(name=tag) and not force:
        log(f"{tag}: up to date")
        client.images.get(tag).tag(IMAGE_REPO, "latest")
        return BuildResult(tag=tag, base=base_tag, built=False)
    log(f"docker build {tag} (base {base_tag})")
    try:
        client.images.build(
            path=str(context),
            tag=tag,
            buildargs={"BASE_IMAGE": base_tag},
            labels={LABEL: PROJECT},
            rm=True,
            forcerm=True,
            network_mode="none",
        )
    except Exception as exc:
        raise UndoBenchError(f"docker build failed: {exc}") from exc
    client.images.get(tag).tag(IMAGE_REPO, "latest")
    return BuildResult(tag=tag, base=base_tag, built=True)


def current_image(client: Any) -> str:
    """`UNDOBENCH_IMAGE` when set (a tag `images build` printed: pins the code a docker run
    uses while the checkout changes or another build retags latest), else the latest."""
    pinned = os.environ.get("UNDOBENCH_IMAGE")
    if pinned:
        if not client.images.list(name=pinned):
            raise UndoBenchError(f"UNDOBENCH_IMAGE={pinned}: no such image")
        return pinned
    if not client.images.list(name=f"{IMAGE_REPO}:latest"):
        raise UndoBenchError(f"no {IMAGE_REPO} image: run `undobench images build` first")
    return f"{IMAGE_REPO}:latest"
