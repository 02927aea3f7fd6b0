"""`python -m pytest_agenteval.testing.standins DIR --gpus K`: write the vLLM and SGLang
stand-ins into DIR (docs/testing-server.md)."""

from __future__ import annotations

import argparse
import sys

from pytest_agenteval.testing.standins.install import install
from pytest_agenteval.testing.standins.launch import FATALS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_agenteval.testing.standins",
        description="Write stand-ins for vLLM and SGLang (and nvidia-smi) into DIR, to rehearse the "
        "GPU path of --serve on a CPU.",
    )
    parser.add_argument("folder", metavar="DIR", help="where to write them (created if missing)")
    parser.add_argument("--gpus", type=int, required=True, metavar="K", help="devices nvidia-smi reports")
    parser.add_argument("--delay-s", type=float, default=0.0, help="start-up delay of every server")
    parser.add_argument("--fatal", choices=FATALS, default=None, help="every server dies of this at start-up")
    parser.add_argument("--script", default=None, metavar="MODULE:ATTR", help="a responder that answers")
    parser.add_argument("--answer", default=None, help="a reply template ({seed} {n} {index} {model})")
    parser.add_argument("--gguf", default=None, metavar="FILE", help="llama.cpp on this gguf answers")
    args = parser.parse_args(argv)
    if args.gpus < 0:
        parser.error(f"--gpus must be >= 0, got {args.gpus}")
    standins = install(
        args.folder,
        args.gpus,
        delay_s=args.delay_s,
        fatal=args.fatal,
        script=args.script,
        answer=args.answer,
        gguf=args.gguf,
    )
    print(f"stand-ins for vLLM and SGLang with {args.gpus} GPU(s) in {standins.folder}; use them with:")
    print(f"  . {standins.folder / 'env.sh'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
