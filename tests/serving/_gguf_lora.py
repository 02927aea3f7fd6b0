"""A seeded GGUF LoRA for a base gguf, in llama.cpp's convert_lora_to_gguf.py layout
(general.type "adapter", adapter.type "lora", `<tensor>.lora_a` (rank x in) and
`<tensor>.lora_b` (out x rank), F32). A stand-in until the lora-fixtures helper's maker lands."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np


def make_gguf_lora(
    base: Path, out: Path, *, seed: int = 0, rank: int = 4, scale: float = 0.5, layers: int = 4
) -> Path:
    """A rank-`rank` adapter on attn_q and attn_v of the first `layers` blocks of `base`."""
    reader = gguf.GGUFReader(str(base))
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
    shapes = {t.name: [int(d) for d in t.shape] for t in reader.tensors}  # ggml order: (in, out)
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(out), arch)
    writer.add_string("general.type", "adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", float(rank))
    for block in range(layers):
        for part in ("attn_q", "attn_v"):
            name = f"blk.{block}.{part}.weight"
            n_in, n_out = shapes[name]
            a = rng.normal(0.0, 1.0 / np.sqrt(n_in), size=(rank, n_in)).astype(np.float32)
            b = rng.normal(0.0, scale, size=(n_out, rank)).astype(np.float32)
            writer.add_tensor(f"{name}.lora_a", a)
            writer.add_tensor(f"{name}.lora_b", b)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out
