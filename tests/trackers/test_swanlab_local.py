"""--agenteval-log swanlab:PROJECT/EXPERIMENT in SwanLab's local and offline modes
(SWANLAB_MODE, SWANLAB_LOG_DIR): the run's `.swanlab` file, read back with SwanLab's own reader
(`DataStoreReader`) and record classes, has each checkpoint's metrics at its step."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._oracle import require_oracle
from tests.trackers.sweep_runs import STEPS, markers, prepare, summaries, sweep_args


@pytest.fixture(scope="module", autouse=True)
def _swanlab_installed() -> None:
    try:
        import swanlab  # noqa: F401
    except ImportError:
        require_oracle("needs swanlab: pip install -e '.[swanlab]' (README command 2)")


def _scalars(path: Path) -> dict[str, dict[int, float]]:
    """metric -> {step: value}, as SwanLab's reader gives the run file's scalar records."""
    from swanlab.proto.swanlab.record.v1.record_pb2 import Record
    from swanlab.sdk.internal.core_python.store import DataStoreReader

    reader = DataStoreReader()
    reader.open(path)
    found: dict[str, dict[int, float]] = {}
    try:
        for raw in reader:
            record = Record()
            record.ParseFromString(raw)
            if record.HasField("scalar"):
                found.setdefault(record.scalar.key, {})[record.scalar.step] = record.scalar.value.number
    finally:
        reader.close()
    return found


@pytest.mark.parametrize("mode", ["local", "offline"])
def test_a_local_or_offline_run_holds_each_checkpoint_at_its_step(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, mode: str
) -> None:
    logs = tmp_path / "swanlog"
    monkeypatch.setenv("SWANLAB_MODE", mode)
    monkeypatch.setenv("SWANLAB_LOG_DIR", str(logs))
    monkeypatch.setenv("SWANLAB_ROOT", str(tmp_path / "swanlab-home"))
    prepare(pytester.path)
    result = pytester.runpytest_subprocess(*sweep_args("--agenteval-log=swanlab:agenteval-test/sweep"))
    assert result.ret == 0
    (line,) = [
        x for x in result.outlines if x.startswith("agenteval: logged to swanlab:agenteval-test/sweep")
    ]
    said = [x for x in result.outlines + result.errlines if "swanlab" in x.lower() and x != line]
    assert said == []  # SwanLab's own banner and its `pip install 'swanlab[dashboard]'` block are not shown
    run_id = line.split(": run ")[1].split()[0]
    (path,) = logs.glob(f"run-*-{run_id}/run-{run_id}.swanlab")
    saved = list(path.parent.glob("files/aime25-*"))
    assert len(saved) == 4 and not [p for p in saved if p.is_symlink()]  # copies, not links
    scalars = _scalars(path)
    by_label = summaries(pytester.path / "out")
    assert scalars["aime25/average_at_n"] == {STEPS[k]: s["average_at_n"] for k, s in by_label.items()}
    assert scalars["aime25/pass_at_k/2"] == {STEPS[k]: s["pass_at_k"]["2"] for k, s in by_label.items()}
    assert scalars["aime25/gates/aime25.average_at_n ge 0.2"] == {100: 1.0, 200: 1.0, 300: 1.0}
    assert [m["run_id"] for m in markers(pytester.path / "out" / "aime25-step-100.jsonl")] == [run_id]
