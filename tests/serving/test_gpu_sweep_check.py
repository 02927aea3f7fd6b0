"""benchmarks/gpu_sweep_check.py's time plan and its report of a run that timed out (the
script itself runs the rehearsal's sweep: `--standins` on a CPU, about 45 s, not here)."""

from __future__ import annotations

import subprocess

import pytest

from benchmarks.gpu_sweep_check import MIN_RUN_S, parse_args, run_limit, said


@pytest.mark.parametrize(
    ("left", "expected"),
    [(420.0, 200.0), (250.0, 200.0), (130.0, 130.0), (MIN_RUN_S, MIN_RUN_S), (59.0, None)],
)
def test_each_run_gets_its_own_limit_or_what_is_left_of_the_total(
    left: float, expected: float | None
) -> None:
    assert run_limit(200.0, left) == expected


def test_the_defaults_leave_room_for_a_second_try_in_a_15_minute_lease() -> None:
    args = parse_args(["--standins"])
    assert (args.time_limit_s, args.run_limit_s, args.eager) == (420.0, 200.0, True)
    assert 2 * args.time_limit_s < 15 * 60


def test_a_timed_out_runs_tail_is_its_text_not_bytes() -> None:
    """TimeoutExpired holds bytes even under text=True: the tail was "b'...'" before."""
    exc = subprocess.TimeoutExpired(["pytest"], 1.0, output=b"wave 1/2 running\n", stderr=b"caf\xc3\xa9 \xff")
    assert said(exc) == "wave 1/2 running\ncafé \ufffd"
    assert said(subprocess.TimeoutExpired(["pytest"], 1.0)) == ""
