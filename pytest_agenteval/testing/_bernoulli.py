"""A responder whose answers are right with a set probability per problem: the model of a
benchmark run as sequential gates see it (each problem its own rate of success). Whether a
request is answered right is decided by hash(seed, prompt), so the same request always gets
the same answer (a rerun, a cache), and requests with different sample seeds are independent
draws: ``rate`` of them right, in the long run."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from pytest_agenteval.testing._responders import Reply, last_user_text


class BernoulliResponder:
    """``rates``: a substring of the problem's prompt -> (its right answer, the probability of
    answering it right). A prompt no key matches is answered wrong. Right replies are
    ``The answer is \\boxed{ANSWER}.``, wrong ones box ``wrong`` instead."""

    def __init__(self, rates: Mapping[str, tuple[str, float]], wrong: str = "-1") -> None:
        for key, (_, rate) in rates.items():
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"the rate of {key!r} must be within [0, 1], got {rate}")
        self.rates = dict(rates)
        self.wrong = wrong

    def right(self, seed: Any, prompt: str) -> bool:
        """Whether the request of `seed` for `prompt` is answered right."""
        for key, (_, rate) in self.rates.items():
            if key in prompt:
                digest = hashlib.sha256(f"{seed}\x1f{prompt}".encode()).digest()
                return int.from_bytes(digest[:8], "big") < rate * 2**64
        return False

    def __call__(self, body: dict[str, Any]) -> Reply:
        prompt = last_user_text(body)
        answer = next((a for key, (a, _) in self.rates.items() if key in prompt), self.wrong)
        shown = answer if self.right(body.get("seed"), prompt) else self.wrong
        return Reply(text=f"The answer is \\boxed{{{shown}}}.")
