"""The public contract every layer builds on: a suite turns problems into rollouts and scores;
a sampler turns messages into completions. Imports nothing else of this package."""
