"""`expand_model_paths`: repeatable --model-path values, globs in natural order, LABEL=PATH,
and the one-line refusals (a glob matching nothing, bad or repeated labels)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agenteval.models.sweep import SweepModel, expand_model_paths, marker_name, natural_key


@pytest.fixture
def ckpts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("step-1000", "step-200", "step-100", "step-20"):
        (tmp_path / "ckpts" / name).mkdir(parents=True)
    for name in ("a.gguf", "b.gguf"):
        (tmp_path / name).write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], []),
        (["base"], [("base", "base")]),
        (["Qwen/Qwen3-8B"], [("Qwen3-8B", "Qwen/Qwen3-8B")]),
        (["a.gguf", "b.gguf"], [("a", "a.gguf"), ("b", "b.gguf")]),
        (
            ["base", "ckpts/step-*"],
            [
                ("base", "base"),
                ("step-20", "ckpts/step-20"),
                ("step-100", "ckpts/step-100"),
                ("step-200", "ckpts/step-200"),
                ("step-1000", "ckpts/step-1000"),
            ],
        ),
        (["ckpts/step-1*"], [("step-100", "ckpts/step-100"), ("step-1000", "ckpts/step-1000")]),
        (["ref=a.gguf", "new=b.gguf"], [("ref", "a.gguf"), ("new", "b.gguf")]),
        (["ref=ckpts/step-2??"], [("ref", "ckpts/step-200")]),  # a labelled glob of one model
        (["new=dir/x=1.gguf"], [("new", "dir/x=1.gguf")]),  # only the first '=' names the label
        (["*.gguf"], [("a", "a.gguf"), ("b", "b.gguf")]),
    ],
)
def test_values_expand_in_order(ckpts: Path, values: list[str], expected: list[tuple[str, str]]) -> None:
    assert expand_model_paths(values) == [SweepModel(label, source) for label, source in expected]


@pytest.mark.parametrize(
    ("values", "line"),
    [
        (["ckpts/nope-*"], "--model-path ckpts/nope-*: the glob matches nothing; fix the pattern"),
        (
            ["a.gguf", "x/a.gguf"],
            "--model-path: a.gguf and x/a.gguf both have the label 'a'; "
            "name one with --model-path LABEL=PATH",
        ),
        (
            ["m=a.gguf", "m=b.gguf"],
            "--model-path: a.gguf and b.gguf both have the label 'm'; name one with --model-path LABEL=PATH",
        ),
        (
            ["ref=ckpts/step-*"],
            "--model-path ref=ckpts/step-*: one label for 4 models; drop ref= (each model is labelled "
            "by its name) or name one path per label",
        ),
        (
            ["dir/my model"],
            "--model-path dir/my model: label 'my model' has characters other than A-Z a-z 0-9 . _ -; "
            "name it with --model-path LABEL=PATH",
        ),
    ],
)
def test_bad_values_are_one_line_naming_the_fix(ckpts: Path, values: list[str], line: str) -> None:
    with pytest.raises(ValueError) as excinfo:
        expand_model_paths(values)
    assert str(excinfo.value) == line


@pytest.mark.parametrize(
    ("names", "ordered"),
    [
        (["step-1000", "step-200", "step-100"], ["step-100", "step-200", "step-1000"]),
        (["b2", "a10", "a9"], ["a9", "a10", "b2"]),
        (["ep1-step-20", "ep1-step-3", "ep0-step-99"], ["ep0-step-99", "ep1-step-3", "ep1-step-20"]),
    ],
)
def test_natural_sort(names: list[str], ordered: list[str]) -> None:
    assert sorted(names, key=natural_key) == ordered


@pytest.mark.parametrize(
    ("label", "marker"),
    [("step-200", "model_step_200"), ("base", "model_base"), ("v1.5_x", "model_v1_5_x")],
)
def test_marker_names(label: str, marker: str) -> None:
    assert marker_name(label) == marker
