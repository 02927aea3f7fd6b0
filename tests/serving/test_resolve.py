"""--model-path resolution: what each kind of value becomes, and the one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agenteval.models.serve.resolve import (
    FileHashes,
    ResolveError,
    register_scheme,
    resolve_model_path,
)

TEMPLATE = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}<|assistant|>"


def make_checkpoint(
    folder: Path, weights: bytes = b"weights-1", template: bool = True, model_type: str = "smollm-test"
) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": model_type, "hidden_size": 8}))
    (folder / "model.safetensors").write_bytes(weights)
    tokenizer_config = {"chat_template": TEMPLATE} if template else {"model_max_length": 2048}
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    (folder / "tokenizer.json").write_text('{"version": "1.0"}')
    return folder


def make_adapter(folder: Path, base: str | None, rank: int = 8) -> Path:
    folder.mkdir(parents=True)
    config = {"peft_type": "LORA", "r": rank, "target_modules": ["q_proj", "v_proj"]}
    if base is not None:
        config["base_model_name_or_path"] = base
    (folder / "adapter_config.json").write_text(json.dumps(config))
    (folder / "adapter_model.safetensors").write_bytes(b"lora-a")
    return folder


def test_gguf_identity_is_the_files_sha256(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF-bytes")
    model = resolve_model_path(str(gguf))
    expected = "dd10e69100403e528487fc240795928e05a8e32bee5e59c3d450c8c60baf30f2"  # sha256sum of the bytes
    assert (model.kind, model.fingerprint, model.served_name) == (
        "gguf",
        expected,
        f"agenteval-{expected[:12]}",
    )


def test_checkpoint_identity_covers_config_tokenizer_and_weights(tmp_path: Path) -> None:
    a = resolve_model_path(str(make_checkpoint(tmp_path / "a")))
    b = resolve_model_path(str(make_checkpoint(tmp_path / "b", weights=b"weights-2")))
    same = resolve_model_path(str(make_checkpoint(tmp_path / "c")))
    assert a.kind == "checkpoint"
    assert sorted(a.files) == ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]
    assert a.fingerprint != b.fingerprint  # weights differ
    assert a.fingerprint == same.fingerprint  # same bytes in another folder: same model


def test_checkpoint_without_chat_template_is_one_line(tmp_path: Path) -> None:
    folder = make_checkpoint(tmp_path / "ckpt", template=False)
    with pytest.raises(ResolveError) as info:
        resolve_model_path(str(folder))
    assert str(info.value) == (
        f"--model-path {folder}: no chat template in the checkpoint (tokenizer_config.json chat_template "
        "or chat_template.jinja); pass --chat-template FILE with the template it was trained with"
    )


def test_chat_template_file_enters_the_identity(tmp_path: Path) -> None:
    folder = make_checkpoint(tmp_path / "ckpt", template=False)
    one, two = tmp_path / "one.jinja", tmp_path / "two.jinja"
    one.write_text(TEMPLATE)
    two.write_text(TEMPLATE + " ")
    first = resolve_model_path(str(folder), chat_template=str(one))
    second = resolve_model_path(str(folder), chat_template=str(two))
    assert first.chat_template == str(one.resolve())
    assert first.fingerprint != second.fingerprint


def test_adapter_takes_its_base_from_adapter_config(tmp_path: Path) -> None:
    base = make_checkpoint(tmp_path / "base")
    adapter = resolve_model_path(str(make_adapter(tmp_path / "lora", str(base), rank=24)))
    assert adapter.kind == "adapter"
    assert adapter.base is not None and adapter.base.path == base
    assert adapter.lora_rank == 24
    assert adapter.fingerprint != adapter.base.fingerprint


def test_base_model_mismatch_is_one_line(tmp_path: Path) -> None:
    base = make_checkpoint(tmp_path / "base")
    other = make_checkpoint(tmp_path / "other")
    lora = make_adapter(tmp_path / "lora", str(base))
    with pytest.raises(ResolveError) as info:
        resolve_model_path(str(lora), base_model=str(other))
    assert str(info.value) == (
        f"--base-model {other} differs from the adapter's base_model_name_or_path {base}; "
        "pass the base the adapter was trained on (or fix adapter_config.json)"
    )


def test_adapter_without_any_base_asks_for_base_model(tmp_path: Path) -> None:
    lora = make_adapter(tmp_path / "lora", None)
    with pytest.raises(ResolveError, match="names no base_model_name_or_path; pass --base-model$"):
        resolve_model_path(str(lora))
    base = make_checkpoint(tmp_path / "base")
    assert resolve_model_path(str(lora), base_model=str(base)).base.path == base  # type: ignore[union-attr]


def use_hub_cache(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """huggingface_hub reads HF_HUB_CACHE once, at import (another test may have imported it)."""
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_CACHE", str(folder))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(folder))


def _hub_cache(root: Path, repo: str, commit: str) -> Path:
    folder = root / f"models--{repo.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(commit)
    return make_checkpoint(folder / "snapshots" / commit)


def test_hub_id_resolves_from_the_local_cache_with_its_revision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit = "0123456789abcdef0123456789abcdef01234567"
    snapshot = _hub_cache(tmp_path / "hub", "someone/tiny-model", commit)
    use_hub_cache(monkeypatch, tmp_path / "hub")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = resolve_model_path("someone/tiny-model")
    assert (model.kind, model.path, model.revision) == ("checkpoint", snapshot, commit)
    assert model.describe()["revision"] == commit


def test_uncached_hub_id_offline_names_the_switch_and_the_download(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_hub_cache(monkeypatch, tmp_path / "empty")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ResolveError) as info:
        resolve_model_path("someone/not-here")
    assert str(info.value) == (
        "--model-path someone/not-here: not in the local Hugging Face cache and HF_HUB_OFFLINE is set; "
        "download it first (huggingface-cli download someone/not-here) or unset HF_HUB_OFFLINE"
    )


def test_scheme_values_are_left_to_their_backends(tmp_path: Path) -> None:
    assert resolve_model_path("trio://run/step-3").kind == "scheme"
    seen = []
    register_scheme(
        "fake-test", lambda value: seen.append(value) or resolve_model_path(str(tmp_path / "x.gguf"))
    )
    (tmp_path / "x.gguf").write_bytes(b"x")
    assert resolve_model_path("fake-test://abc").kind == "gguf"
    assert seen == ["fake-test://abc"]


def test_folder_that_is_no_model_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ResolveError, match="a folder without config.json"):
        resolve_model_path(str(tmp_path))


def test_hashes_are_cached_on_disk_by_path_size_and_mtime(tmp_path: Path) -> None:
    target = tmp_path / "w.safetensors"
    target.write_bytes(b"abc")
    cache = tmp_path / "hashes.json"
    hashes = FileHashes(cache)
    first = hashes.sha256(target)
    hashes.save()
    stored = json.loads(cache.read_text())
    assert list(stored.values()) == [first]
    key = next(iter(stored))
    cache.write_text(json.dumps({key: "remembered"}))  # a later run trusts the record...
    assert FileHashes(cache).sha256(target) == "remembered"
    target.write_bytes(b"abcd")  # ...until size or mtime change
    assert (
        FileHashes(cache).sha256(target) == "88d4266fd4e6338d13b845fcf289579d209c897823b9217da3e161936f031589"
    )


def test_uncached_hub_id_with_the_hub_unreachable_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    with socket.socket() as sock:  # a closed loopback port: the "hub" refuses at once
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    use_hub_cache(monkeypatch, tmp_path / "empty")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(ResolveError) as info:
        resolve_model_path("someone/not-here")
    assert str(info.value).startswith(
        "--model-path someone/not-here: not in the local Hugging Face cache and the hub is unreachable ("
        f"http://127.0.0.1:{port}: "
    )
    assert str(info.value).endswith(
        "download it where the hub answers (huggingface-cli download someone/not-here)"
    )


def test_classifying_reads_no_weights(tmp_path: Path) -> None:
    folder = make_checkpoint(tmp_path / "ckpt")
    (folder / "model.safetensors").chmod(0)  # unreadable (for non-root): hashing would fail
    model = resolve_model_path(str(folder), identity=False)
    assert (model.kind, model.fingerprint, set(model.files.values())) == ("checkpoint", "", {""})
