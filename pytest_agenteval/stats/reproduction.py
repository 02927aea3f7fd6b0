"""How far a reproduction of a published avg@N may fall from the published number by
sampling alone. Both numbers average N_ours and N_published generations over the same
`problems`; with each problem's true rate p_i, the variance of one avg@N is
sum p_i(1 - p_i) / (problems^2 N), largest (for a given mean p) when every p_i equals p.
So the difference of the two is within

    z * sqrt(p(1 - p) / problems * (1/N_ours + 1/N_published))

95 % of the time (z = 1.96) at most: a bound, since real problems are mostly all-or-nothing
(p_i near 0 or 1), which makes the sampling noise smaller. Anything past it is the protocol
(engine, template, length, answer extraction), not luck. The summary's `ci95` answers another
question (how the rate would move on other problems like these) and is much wider."""

from __future__ import annotations

import math

from pytest_agenteval.stats.proportions import Z95


def reproduction_band(published: float, problems: int, samples: int, published_samples: int | None) -> float:
    """Half-width of the 95 % band around `published` (a rate in [0, 1]) that a run of
    `samples` generations per problem lands in by sampling noise alone (an upper bound).
    `published_samples` None (not stated): the published number's own noise is left out."""
    if not 0 <= published <= 1 or min(problems, samples, published_samples or 1) < 1:
        raise ValueError("published must be a rate in [0, 1] and the counts >= 1")
    theirs = 1 / published_samples if published_samples else 0.0
    variance = published * (1 - published) / problems * (1 / samples + theirs)
    return Z95 * math.sqrt(variance)
