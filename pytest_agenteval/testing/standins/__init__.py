"""Stand-ins for vLLM and SGLang: the GPU path of `--serve` rehearsed on a CPU.

`python -m pytest_agenteval.testing.standins DIR --gpus K` (or `install(DIR, K)`) writes a
`vllm` executable and an `nvidia-smi` into `DIR/bin`, and an importable `vllm` and
`sglang.launch_server` into DIR. With `DIR/bin` first on PATH and DIR first on PYTHONPATH
(`. DIR/env.sh`), the launcher's real vLLM and SGLang code runs unchanged against servers
that take exactly the flags of vLLM 0.34.0 and SGLang 0.5.23 (`flags/`), hold the devices
of `CUDA_VISIBLE_DEVICES`, and answer with the package's mock server (docs/testing-server.md).
"""

from __future__ import annotations

from pytest_agenteval.testing.standins.install import Standins, install

__all__ = ["Standins", "install"]
