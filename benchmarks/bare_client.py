"""The floor: a bare asyncio client, one request per sample, a semaphore of C.

python benchmarks/bare_client.py URL --problems 30 --samples 12 --concurrency 32"""

from __future__ import annotations

import argparse
import asyncio

import aiohttp


async def main(url: str, problems: int, samples: int, concurrency: int) -> None:
    gate = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(problem: int, sample: int) -> str:
            body = {
                "model": "mock-model",
                "max_tokens": 1024,
                "temperature": 1.0,
                "seed": problem * 1000 + sample,
                "messages": [{"role": "user", "content": f"What is {problem} + {problem}?"}],
            }
            async with gate, session.post(f"{url}/chat/completions", json=body) as response:
                return (await response.json())["choices"][0]["message"]["content"]

        replies = await asyncio.gather(*(one(p, s) for p in range(problems) for s in range(samples)))
    assert len(replies) == problems * samples


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--problems", type=int, default=30)
    parser.add_argument("--samples", type=int, default=12)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    asyncio.run(main(args.url, args.problems, args.samples, args.concurrency))
