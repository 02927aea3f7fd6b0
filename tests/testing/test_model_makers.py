"""The model makers of testing/models.py: deterministic bytes from a seed, and files
llama.cpp reads as what they claim to be (an adapter, a model)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from pytest_agenteval.models.backends.llama import embedded_model_path
from pytest_agenteval.models.gguf import GgufHeaderError, gguf_general_type, gguf_metadata
from pytest_agenteval.testing.models import _base_reader, make_gguf_lora, make_perturbed_gguf

pytest.importorskip("gguf", reason="the gguf makers need the gguf package (pip install gguf)")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("kind", ["lora", "perturbed"])
def test_the_same_seed_gives_the_same_bytes_and_another_seed_others(
    kind: str, agenteval_model_files, tmp_path: Path
) -> None:
    # first and other come from the session's files (made once, as the other tests here and
    # the session fixture's test use them); again is made anew by the maker itself
    make = {"lora": make_gguf_lora, "perturbed": make_perturbed_gguf}[kind]
    made = {"lora": agenteval_model_files.gguf_lora, "perturbed": agenteval_model_files.perturbed_gguf}[kind]
    first = made(seed=1)
    again = make(tmp_path / "b.gguf", seed=1)
    other = made(seed=0)
    assert sha256(first) == sha256(again)
    assert sha256(first) != sha256(other)


def test_the_files_say_what_they_are_as_gguf_s_own_reader_reads_them(agenteval_model_files) -> None:
    import gguf

    lora = agenteval_model_files.gguf_lora(seed=0)
    other = agenteval_model_files.perturbed_gguf(seed=0)
    keys = ["general.type", "general.architecture", "adapter.type", "adapter.lora.alpha"]
    for path in (embedded_model_path(), lora, other):
        # gguf's own reader; the base's is the one the makers parsed (about 2.8 s of CPU a parse)
        reader = _base_reader(path) if path == embedded_model_path() else gguf.GGUFReader(path)
        expected = {k: reader.fields[k].contents() for k in keys if k in reader.fields}
        assert gguf_metadata(path, keys) == expected
    assert [gguf_general_type(p) for p in (embedded_model_path(), lora, other)] == [
        "model",
        "adapter",
        "model",
    ]
    reader = gguf.GGUFReader(lora)
    shapes = {t.name: tuple(int(n) for n in t.shape) for t in reader.tensors}
    assert len(shapes) == 30 * 2 * 2  # 30 blocks, attn_q and attn_v, lora_a and lora_b
    assert shapes["blk.0.attn_q.weight.lora_a"] == (576, 8)  # ggml order: (input, rank 8)
    assert shapes["blk.0.attn_v.weight.lora_b"] == (8, 192)  # (rank, output)


def test_a_file_that_is_not_gguf_is_one_line(tmp_path: Path) -> None:
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"not a model")
    with pytest.raises(GgufHeaderError, match=f"^{fake} is not a gguf file \\(no GGUF magic\\)$"):
        gguf_general_type(fake)


def test_the_session_fixture_makes_each_file_once(agenteval_model_files, agenteval_gguf_lora) -> None:
    assert agenteval_model_files.gguf_lora() == agenteval_gguf_lora
    stamp = agenteval_gguf_lora.stat().st_mtime_ns
    assert agenteval_model_files.gguf_lora().stat().st_mtime_ns == stamp
    assert gguf_general_type(agenteval_model_files.perturbed_gguf(seed=1)) == "model"


def test_a_lora_of_another_rank_has_tensors_of_that_rank(tmp_path: Path) -> None:
    import gguf

    lora = make_gguf_lora(tmp_path / "rank4.gguf", seed=0, rank=4)
    shapes = {t.name: tuple(int(n) for n in t.shape) for t in gguf.GGUFReader(lora).tensors}
    assert shapes["blk.0.attn_q.weight.lora_a"] == (576, 4)  # ggml order: (input, rank)
    assert shapes["blk.0.attn_v.weight.lora_b"] == (4, 192)  # (rank, output)
