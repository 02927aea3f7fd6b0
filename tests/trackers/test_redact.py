"""A URL's user information, removed wherever a value is shown or written (config/redact.py)."""

from __future__ import annotations

import pytest

from pytest_agenteval.config.redact import without_credentials


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("mlflow:http://alice:s3cret@127.0.0.1:5000", "mlflow:http://127.0.0.1:5000"),
        # a password holding '@': the host starts after the last one (a reviewer's find: 'ss@' was shown)
        ("mlflow:http://alice:p@ss@127.0.0.1:5000", "mlflow:http://127.0.0.1:5000"),
        ("mlflow:http://alice:s3cret@host:5000?experiment=a@b", "mlflow:http://host:5000?experiment=a@b"),
        ("mlflow:http://u@host/x", "mlflow:http://host/x"),
        ("a http://u:p@h/x and https://v:q@k/y", "a http://h/x and https://k/y"),
        ("mlflow:http://u:p@[::1", "mlflow:http://[::1"),
        ("wandb:proj/run-1", "wandb:proj/run-1"),
        ("mlflow:?experiment=x@y", "mlflow:?experiment=x@y"),
    ],
)
def test_the_user_information_is_removed(given: str, shown: str) -> None:
    assert without_credentials(given) == shown
