"""Loading GAIA from a folder (both layouts) or the Hub, and its one-line errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pytest_agenteval.tasks.gaia import (
    NO_TOKEN_MESSAGE,
    GaiaDataError,
    GaiaTask,
    GaiaUnavailable,
    load_gaia,
    resolve_token,
)

NO_TOKEN_LINE = (
    "GAIA is gated: accept the terms at https://huggingface.co/datasets/gaia-benchmark/GAIA "
    "and set HF_TOKEN, or pass --gaia-path DIR"
)


def test_validation_split_in_both_layouts(gaia_root: Path, synthetic: ModuleType) -> None:
    tasks = load_gaia("validation", gaia_root)
    assert [t.task_id for t in tasks] == [
        synthetic.task_id("validation", s.key) for s in synthetic.VALIDATION
    ]
    assert [t.level for t in tasks] == [1, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3]
    assert [t.final_answer for t in tasks] == [s.answer for s in synthetic.VALIDATION]
    assert [t.annotator_steps for t in tasks] == [2, 3, 3, 3, 3, 4, 3, 5, 6, 7, 8, 9]


def test_first_task_fields(gaia_root: Path, synthetic: ModuleType) -> None:
    task = load_gaia("validation", gaia_root)[0]
    assert task == GaiaTask(
        task_id=synthetic.task_id("validation", "spider-legs"),
        question="How many legs do three spiders have in total?",
        level=1,
        final_answer="24",
        file_name=None,
        file_path=None,
        annotator_steps=2,
        annotator_tools=(),
    )
    assert task.annotator_metadata == {
        "Steps": "1. Think about spider-legs\n2. Answer",
        "Number of steps": "2",
        "How long did this take?": "5 minutes",
        "Tools": "None",
        "Number of tools": "1",
    }


def test_annotator_tools_lose_their_numbering(gaia_root: Path) -> None:
    assert load_gaia("validation", gaia_root)[1].annotator_tools == ("Web browser", "Calculator")


def test_attachments_resolve_beside_the_metadata(gaia_root: Path) -> None:
    split_dir = gaia_root / "2023" / "validation"
    attached = {t.file_name: t.file_path for t in load_gaia("validation", gaia_root) if t.file_name}
    names = [
        "shopping.txt",
        "scores.csv",
        "inventory.json",
        "RELEASE.md",
        "budget.xlsx",
        "survey.pdf",
    ]
    assert attached == {name: split_dir / name for name in names}


def test_test_split_has_no_answers(gaia_root: Path) -> None:
    tasks = load_gaia("test", gaia_root)
    assert [t.level for t in tasks] == [1, 2, 2, 3]
    assert [t.final_answer for t in tasks] == [None, None, None, None]
    assert [t.annotator_steps for t in tasks] == [None, None, None, None]
    assert tasks[1].file_path == gaia_root / "2023" / "test" / "notes.txt"


@pytest.mark.parametrize("where", ["", "2023", "2023/validation", "2023/validation/metadata.parquet"])
def test_path_may_point_at_root_year_split_or_metadata(make_gaia: Callable[..., Path], where: str) -> None:
    root = make_gaia("parquet")
    assert len(load_gaia("validation", root / where)) == 12


def test_path_may_be_a_string(make_gaia: Callable[..., Path]) -> None:
    assert len(load_gaia("test", str(make_gaia("jsonl")))) == 4


def test_parquet_is_read_before_jsonl(make_gaia: Callable[..., Path]) -> None:
    root = make_gaia("parquet")
    split_dir = root / "2023" / "validation"
    (split_dir / "metadata.jsonl").write_text(_line(_row("only-in-jsonl")), encoding="utf-8")
    assert len(load_gaia("validation", root)) == 12


def test_split_folder_of_the_other_split_is_refused(make_gaia: Callable[..., Path]) -> None:
    split_dir = make_gaia("parquet") / "2023" / "validation"
    with pytest.raises(GaiaUnavailable) as info:
        load_gaia("test", split_dir)
    assert str(info.value) == (
        f"GAIA path {split_dir} holds the validation split, not test: pass the dataset root instead"
    )


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(GaiaUnavailable) as info:
        load_gaia("validation", tmp_path / "nowhere")
    assert str(info.value) == (
        f"GAIA path {tmp_path / 'nowhere'} does not exist: pass --gaia-path DIR with "
        "2023/validation/metadata.parquet in it, or set HF_TOKEN to download GAIA"
    )


def test_folder_without_metadata(tmp_path: Path) -> None:
    with pytest.raises(GaiaUnavailable) as info:
        load_gaia("test", tmp_path)
    assert str(info.value) == (
        f"no GAIA metadata for the test split under {tmp_path}: expected "
        "2023/test/metadata.parquet or metadata.jsonl"
    )


def test_path_to_another_file(tmp_path: Path) -> None:
    (tmp_path / "x.csv").write_text("", encoding="utf-8")
    with pytest.raises(GaiaUnavailable) as info:
        load_gaia("test", tmp_path / "x.csv")
    assert str(info.value) == f"GAIA path {tmp_path / 'x.csv'} is a file; pass the dataset folder instead"


def test_unknown_split() -> None:
    with pytest.raises(ValueError, match="GAIA split must be 'validation' or 'test', not 'train'"):
        load_gaia("train", Path("."))  # type: ignore[arg-type]


# --- malformed data ---------------------------------------------------------------


def _row(task_id: str, **changes: Any) -> dict[str, Any]:
    row = {"task_id": task_id, "Question": "Q?", "Level": "1", "Final answer": "1", "file_name": ""}
    row.update(changes)
    return row


def _line(row: dict[str, Any]) -> str:
    return json.dumps(row) + "\n"


def _jsonl_dir(tmp_path: Path, *rows: dict[str, Any]) -> Path:
    split_dir = tmp_path / "2023" / "validation"
    split_dir.mkdir(parents=True)
    (split_dir / "metadata.jsonl").write_text("".join(map(_line, rows)), encoding="utf-8")
    return split_dir


def _data_error(tmp_path: Path) -> str:
    with pytest.raises(GaiaDataError) as info:
        load_gaia("validation", tmp_path)
    return str(info.value)


@pytest.mark.parametrize(("level", "parsed"), [("2", 2), (" 3 ", 3), (2, 2), (3.0, 3), ("10", 10)])
def test_level_may_be_int_float_or_string(tmp_path: Path, level: Any, parsed: int) -> None:
    _jsonl_dir(tmp_path, _row("t1", Level=level))
    assert load_gaia("validation", tmp_path)[0].level == parsed


@pytest.mark.parametrize("level", ["hard", "", 0, -1, 1.5, True, None, "1.0"])
def test_bad_level(tmp_path: Path, level: Any) -> None:
    split_dir = _jsonl_dir(tmp_path, _row("t1", Level=level))
    assert _data_error(tmp_path) == (
        f"{split_dir / 'metadata.jsonl'} line 1 (task t1): Level {level!r} is not a positive integer"
    )


def test_missing_columns(tmp_path: Path) -> None:
    row = _row("t1")
    del row["Question"], row["Final answer"]
    split_dir = _jsonl_dir(tmp_path, _row("t0"), row)
    assert _data_error(tmp_path) == (
        f"{split_dir / 'metadata.jsonl'} line 2: missing column(s) 'Question', 'Final answer'"
    )


def test_missing_columns_in_parquet(tmp_path: Path, synthetic: ModuleType) -> None:
    split_dir = tmp_path / "2023" / "validation"
    split_dir.mkdir(parents=True)
    synthetic.write_parquet(split_dir / "metadata.parquet", [{"task_id": "t1", "Question": "Q"}])
    assert _data_error(tmp_path) == (
        f"{split_dir / 'metadata.parquet'} row 1: missing column(s) 'Level', 'Final answer'"
    )


def test_duplicate_task_ids(tmp_path: Path) -> None:
    split_dir = _jsonl_dir(tmp_path, _row("t1"), _row("t2"), _row("t1"))
    assert _data_error(tmp_path) == f"{split_dir / 'metadata.jsonl'}: duplicate task_id 't1'"


@pytest.mark.parametrize("task_id", ["", "  ", None, 7])
def test_bad_task_id(tmp_path: Path, task_id: Any) -> None:
    split_dir = _jsonl_dir(tmp_path, _row(task_id))
    assert _data_error(tmp_path) == (
        f"{split_dir / 'metadata.jsonl'} line 1: task_id must be a non-empty string, got {task_id!r}"
    )


def test_missing_attachment(tmp_path: Path) -> None:
    split_dir = _jsonl_dir(tmp_path, _row("t1", file_name="gone.png"))
    assert _data_error(tmp_path) == (
        f"{split_dir / 'metadata.jsonl'} line 1 (task t1): attachment 'gone.png' is missing from {split_dir}"
    )


@pytest.mark.parametrize("file_name", ["../secret.txt", "sub/x.txt", ".."])
def test_attachment_name_must_be_a_plain_file_name(tmp_path: Path, file_name: str) -> None:
    split_dir = _jsonl_dir(tmp_path, _row("t1", file_name=file_name))
    assert _data_error(tmp_path) == (
        f"{split_dir / 'metadata.jsonl'} line 1 (task t1): file_name {file_name!r} is not a plain file name"
    )


def test_invalid_json_line(tmp_path: Path) -> None:
    split_dir = _jsonl_dir(tmp_path, _row("t1"))
    with (split_dir / "metadata.jsonl").open("a", encoding="utf-8") as handle:
        handle.write("\n{not json\n")
    assert _data_error(tmp_path) == (
        f"{split_dir / 'metadata.jsonl'} line 3: invalid JSON (Expecting property name enclosed "
        "in double quotes)"
    )


def test_json_line_that_is_not_an_object(tmp_path: Path) -> None:
    split_dir = tmp_path / "validation"
    split_dir.mkdir()
    (split_dir / "metadata.jsonl").write_text("[1, 2]\n", encoding="utf-8")
    assert _data_error(tmp_path) == f"{split_dir / 'metadata.jsonl'} line 1: expected a JSON object"


def test_empty_metadata(tmp_path: Path) -> None:
    split_dir = _jsonl_dir(tmp_path)
    assert _data_error(tmp_path) == f"{split_dir / 'metadata.jsonl'}: no tasks"


def test_unreadable_parquet(tmp_path: Path) -> None:
    split_dir = tmp_path / "validation"
    split_dir.mkdir()
    (split_dir / "metadata.parquet").write_bytes(b"garbage")
    assert _data_error(tmp_path) == (
        f"{split_dir / 'metadata.parquet'}: not a readable Parquet file (ArrowInvalid)"
    )


@pytest.mark.parametrize(
    ("metadata", "steps", "tools"),
    [
        ({"Number of steps": "5", "Tools": "1. Search\n2) Python\n- OCR\n"}, 5, ("Search", "Python", "OCR")),
        ({"Number of steps": 4, "Tools": ["web", "pdf"]}, 4, ("web", "pdf")),
        ({"Number of steps": "five", "Tools": "None"}, None, ()),
        ('{"Number of steps": "7", "Tools": "1. calculator"}', 7, ("calculator",)),
        ("not metadata", None, ()),
        (None, None, ()),
    ],
)
def test_annotator_metadata_parsing(
    tmp_path: Path, metadata: Any, steps: int | None, tools: tuple[str, ...]
) -> None:
    _jsonl_dir(tmp_path, _row("t1", **{"Annotator Metadata": metadata}))
    task = load_gaia("validation", tmp_path)[0]
    assert (task.annotator_steps, task.annotator_tools) == (steps, tools)


@pytest.mark.parametrize(
    ("answer", "parsed"),
    [("?", None), (" ? ", None), ("", None), (None, None), (17, "17"), (" 17 ", " 17 ")],
)
def test_final_answer_parsing(tmp_path: Path, answer: Any, parsed: str | None) -> None:
    _jsonl_dir(tmp_path, _row("t1", **{"Final answer": answer}))
    assert load_gaia("validation", tmp_path)[0].final_answer == parsed


def test_tasks_are_frozen(gaia_root: Path) -> None:
    task = load_gaia("validation", gaia_root)[0]
    with pytest.raises(AttributeError):
        task.level = 3  # type: ignore[misc]


# --- the Hugging Face Hub ---------------------------------------------------------


def test_no_token_is_one_line_saying_how_to_get_access(no_hf_token: None) -> None:
    with pytest.raises(GaiaUnavailable) as info:
        load_gaia("validation")
    assert str(info.value) == NO_TOKEN_LINE == NO_TOKEN_MESSAGE


def test_token_resolution_order(monkeypatch: pytest.MonkeyPatch, no_hf_token: None) -> None:
    assert resolve_token() is None
    monkeypatch.setattr("pytest_agenteval.tasks.gaia._data._stored_token", lambda: "stored")
    assert resolve_token() == "stored"
    monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", "legacy")
    assert resolve_token() == "legacy"
    monkeypatch.setenv("HF_TOKEN", "hf_env")
    assert resolve_token() == "hf_env"


class _FakeHub:
    """Stands in for huggingface_hub.snapshot_download: records the call."""

    def __init__(self, root: Path | None = None, error: Exception | None = None) -> None:
        self.root, self.error = root, error
        self.calls: list[dict[str, Any]] = []

    def __call__(self, repo_id: str, **kwargs: Any) -> str:
        self.calls.append({"repo_id": repo_id, **kwargs})
        if self.error is not None:
            raise self.error
        return str(self.root)


def test_hub_download_of_one_split(
    monkeypatch: pytest.MonkeyPatch, make_gaia: Callable[..., Path], no_hf_token: None
) -> None:
    hub = _FakeHub(make_gaia("parquet"))
    monkeypatch.setattr("huggingface_hub.snapshot_download", hub)
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    assert len(load_gaia("test", revision="abc123")) == 4
    assert hub.calls == [
        {
            "repo_id": "gaia-benchmark/GAIA",
            "repo_type": "dataset",
            "token": "hf_secret",
            "revision": "abc123",
            "allow_patterns": ["2023/test/*"],
        }
    ]


def test_explicit_token_wins(monkeypatch: pytest.MonkeyPatch, make_gaia: Callable[..., Path]) -> None:
    hub = _FakeHub(make_gaia("jsonl"))
    monkeypatch.setattr("huggingface_hub.snapshot_download", hub)
    monkeypatch.setenv("HF_TOKEN", "from-env")
    load_gaia("validation", token="explicit")
    assert hub.calls[0]["token"] == "explicit"


def _named_error(name: str, message: str) -> Exception:
    return type(name, (Exception,), {})(message)


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (
            _named_error("GatedRepoError", "403 Client Error\nmore"),
            "GAIA is gated and this token has no access yet: accept the terms at "
            "https://huggingface.co/datasets/gaia-benchmark/GAIA with the token's account, "
            "or pass --gaia-path DIR",
        ),
        (
            _named_error("RepositoryNotFoundError", "404"),
            "the Hugging Face Hub rejected the token for gaia-benchmark/GAIA "
            "(RepositoryNotFoundError): check HF_TOKEN and accept the terms at "
            "https://huggingface.co/datasets/gaia-benchmark/GAIA, or pass --gaia-path DIR",
        ),
        (
            ConnectionError("Max retries exceeded\ntraceback details"),
            "could not download GAIA from the Hugging Face Hub (ConnectionError: Max retries "
            "exceeded); retry, or pass --gaia-path DIR",
        ),
    ],
)
def test_hub_errors_are_one_line(monkeypatch: pytest.MonkeyPatch, error: Exception, message: str) -> None:
    monkeypatch.setattr("huggingface_hub.snapshot_download", _FakeHub(error=error))
    with pytest.raises(GaiaUnavailable) as info:
        load_gaia("validation", token="hf_x")
    assert str(info.value) == message
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_hub_snapshot_without_the_split(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("huggingface_hub.snapshot_download", _FakeHub(tmp_path))
    with pytest.raises(GaiaUnavailable, match="^no GAIA metadata for the validation split under "):
        load_gaia("validation", token="hf_x")
