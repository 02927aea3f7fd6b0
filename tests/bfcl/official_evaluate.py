"""Run bfcl-eval's own evaluation (what ``bfcl evaluate`` runs: ``eval_runner.main``) on
exported result files, in a child process, and print its scores as JSON.

``bfcl evaluate`` looks the model up in bfcl-eval's registry, whose import pulls in every
vendor SDK; the child installs a stub registry first whose entry for any name is a
prompting (or FC) model with the OpenAI handler's decoders, then calls
``eval_runner.main`` unchanged (score files, leaderboard CSVs).

    python -m tests.bfcl.official_evaluate RESULT_ROOT MODEL CATEGORY[,CATEGORY...] [--fc]
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

REQUIREMENTS = ("pandas", "dotenv", "tqdm", "filelock", "overrides")


def official_scores(result_root: Path, model: str, categories: list[str], fc: bool = False) -> dict[str, Any]:
    """{"categories": {category: {accuracy, correct_count, total_count}}, "overall": float}."""
    args = [
        sys.executable,
        "-m",
        "tests.bfcl.official_evaluate",
        str(result_root),
        model,
        ",".join(categories),
    ]
    done = subprocess.run(
        [*args, *(["--fc"] if fc else [])],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=Path(__file__).resolve().parents[2],
    )
    if done.returncode != 0:
        raise RuntimeError(f"official evaluation failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _install_registry(fc: bool) -> None:
    from bfcl_eval.model_handler.base_handler import BaseHandler
    from bfcl_eval.model_handler.utils import (
        convert_to_function_call,
        default_decode_ast_prompting,
        default_decode_execute_prompting,
    )

    class Handler(BaseHandler):
        def decode_ast(self, result, language, has_tool_call_tag):
            if self.is_fc_model:
                return [{name: json.loads(args) for name, args in call.items()} for call in result]
            return default_decode_ast_prompting(result, language, has_tool_call_tag)

        def decode_execute(self, result, has_tool_call_tag):
            if self.is_fc_model:
                return convert_to_function_call(result)
            return default_decode_execute_prompting(result, has_tool_call_tag)

    class Registry(dict):
        def __missing__(self, key: str) -> Any:
            return types.SimpleNamespace(
                model_name=key,
                display_name=key,
                url="",
                org="",
                license="",
                model_handler=Handler,
                input_price=None,
                output_price=None,
                is_fc_model=fc,
                underscore_to_dot=fc,
            )

        def __contains__(self, key: object) -> bool:
            return True

    module = types.ModuleType("bfcl_eval.constants.model_config")
    module.MODEL_CONFIG_MAPPING = Registry()
    sys.modules["bfcl_eval.constants.model_config"] = module


def _error_type(row: dict[str, Any]) -> str | None:
    # Multi-turn and agentic rows nest it under "error"; single-turn rows carry it at the top.
    error = row.get("error")
    return error.get("error_type") if isinstance(error, dict) else row.get("error_type")


def main(argv: list[str]) -> None:
    result_root, model, categories = Path(argv[0]).resolve(), argv[1], argv[2].split(",")
    fc = "--fc" in argv
    os.environ.setdefault("BFCL_PROJECT_ROOT", tempfile.mkdtemp(prefix="bfcl_official_"))
    score_dir = Path(tempfile.mkdtemp(prefix="bfcl_scores_"))
    _install_registry(fc)
    from bfcl_eval.eval_checker import eval_runner

    stdout = sys.stdout
    sys.stdout = sys.stderr  # the runner prints progress; keep stdout for the JSON
    try:
        eval_runner.main([model], categories, result_root, score_dir, partial_eval=True)
    finally:
        sys.stdout = stdout
    scores = {}
    for path in (score_dir / model).rglob("BFCL_v4_*_score.json"):
        header, *failures = (json.loads(line) for line in path.read_text().splitlines())
        category = path.name.removeprefix("BFCL_v4_").removesuffix("_score.json")
        keys = ("accuracy", "correct_count", "total_count", "accuracy_max_delta", "accuracy_std")
        scores[category] = {k: header[k] for k in keys if k in header}
        scores[category]["error_types"] = {row["id"]: _error_type(row) for row in failures}
    with (score_dir / "data_overall.csv").open() as handle:
        row = next(csv.DictReader(handle))
    overall = float(row["Overall Acc"].rstrip("%")) / 100 if row["Overall Acc"] != "N/A" else None
    print(json.dumps({"categories": scores, "overall": overall}))


if __name__ == "__main__":
    main(sys.argv[1:])
