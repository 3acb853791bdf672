"""Split models assembled from their part packages: order, SHA-256, missing parts named,
nothing half-written left in the cache. Built on small part packages made here (the real
1.1 GB model is checked by `undobench models verify` in CI)."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from undobench_gym.agents.llm import models
from undobench_gym.agents.llm.models import ShippedModel, assemble, missing_parts, verify
from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.harness.cli import main

PARTS = [b"GGUF" + bytes([i]) * 1000 for i in range(3)]


@pytest.fixture
def split_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ShippedModel]:
    site = tmp_path / "site"
    parts = []
    for i, data in enumerate(PARTS, start=1):
        pkg = site / f"ubtest_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(data)
        parts.append((f"ubtest-part{i}", f"ubtest_part{i}", f"data/part{i:02d}.bin"))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("UNDOBENCH_MODEL_CACHE", str(tmp_path / "cache"))
    whole = b"".join(PARTS)
    model = ShippedModel(
        "ubtest",
        "test model",
        parts=tuple(parts),
        sha256=hashlib.sha256(whole).hexdigest(),
        size=len(whole),
    )
    monkeypatch.setitem(models.MODELS, "ubtest", model)
    yield model
    for name in [m for m in sys.modules if m.startswith("ubtest_part")]:
        del sys.modules[name]


def test_parts_are_concatenated_in_order_and_checked(split_model: ShippedModel) -> None:
    path = assemble(split_model)
    assert path.read_bytes() == b"".join(PARTS)
    assert verify(split_model) == path
    assert [p.name for p in path.parent.iterdir()] == ["ubtest.gguf"]  # no temporary left


def test_a_missing_part_is_named_with_the_install_command(
    split_model: ShippedModel, tmp_path: Path
) -> None:
    (tmp_path / "site" / "ubtest_part2" / "data" / "part02.bin").unlink()
    assert missing_parts(split_model) == ["ubtest-part2"]
    with pytest.raises(UndoBenchError, match=r"1 more of its 3 part packages \(ubtest-part2\)"):
        assemble(split_model)
    assert not (tmp_path / "cache" / "ubtest.gguf").exists()


def test_a_damaged_part_fails_the_hash_and_leaves_no_file(
    split_model: ShippedModel, tmp_path: Path
) -> None:
    (tmp_path / "site" / "ubtest_part3" / "data" / "part03.bin").write_bytes(b"x" * 10)
    with pytest.raises(UndoBenchError, match="SHA-256"):
        assemble(split_model)
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_cached_file_damaged_later_is_removed_by_verify(
    split_model: ShippedModel,
) -> None:
    path = assemble(split_model)
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(UndoBenchError, match="removed"):
        verify(split_model)
    assert not path.exists()
    assert verify(split_model).read_bytes() == b"".join(PARTS)  # rebuilt from the parts


def test_the_cli_lists_verifies_and_prints_the_path(
    split_model: ShippedModel, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "list"]) == 0
    assert "not assembled yet" in capsys.readouterr().out
    assert main(["models", "verify", "ubtest"]) == 0
    assert "ubtest: ok" in capsys.readouterr().out
    assert main(["models", "path", "ubtest"]) == 0
    assert capsys.readouterr().out.strip().endswith("ubtest.gguf")
    assert main(["models", "verify", "no-such-model"]) == 2


@pytest.mark.parametrize(
    ("spec", "flags"),
    [
        ("none", []),
        ("ngram-simple", ["--spec-type", "ngram-simple"]),
        (
            "ngram-map-k:4,16",
            [
                *("--spec-type", "ngram-map-k"),
                *("--spec-ngram-map-k-size-n", "4", "--spec-ngram-map-k-size-m", "16"),
            ],
        ),
    ],
)
def test_speculative_decoding_becomes_llama_server_flags(spec: str, flags: list[str]) -> None:
    from undobench_gym.agents.llm.model_server import speculative_args

    assert speculative_args(spec) == flags


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("draft-simple", "unknown speculative decoding"),  # needs a draft model we lack
        ("ngram-simple:4", "sizes are N,M"),
        ("ngram-simple:0,8", "from 1 to 64"),
        ("none:3,8", "takes no sizes"),
    ],
)
def test_a_bad_speculative_setting_is_a_clear_error(spec: str, says: str) -> None:
    from undobench_gym.agents.llm.model_server import speculative_args

    with pytest.raises(UndoBenchError, match=says):
        speculative_args(spec)
