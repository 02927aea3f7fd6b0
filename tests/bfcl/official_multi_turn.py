"""bfcl-eval's own multi-turn evaluation, run as the oracle of the parity test.

``eval_runner._evaluate_single_multi_turn_entry`` is short and needs a model
handler; its steps are replicated here around the official pieces: the
official decoders (``default_decode_execute_prompting``,
``convert_to_function_call``), ``is_empty_execute_response`` and
``multi_turn_checker`` itself, which ``eval``s the calls on bfcl-eval's
environment instances. Those instances live in the module's globals, keyed by
model name and entry id; they are cleared after every judgement so that each
case starts fresh.
"""

from __future__ import annotations

import copy
from typing import Any

from pytest_agenteval.tasks.bfcl._mt_data import MultiTurnEntry

from .official_checker import OfficialJudge

MODEL = "parity_multi_turn_model"


class OfficialMultiTurnJudge:
    def __init__(self) -> None:
        OfficialJudge()  # the stub model registry and BFCL_PROJECT_ROOT
        from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker
        from bfcl_eval.model_handler.utils import (
            convert_to_function_call,
            default_decode_execute_prompting,
        )

        self.utils = multi_turn_utils
        self.checker = multi_turn_checker
        self.decode_text = default_decode_execute_prompting
        self.decode_fc = convert_to_function_call

    def judge(
        self, entry: MultiTurnEntry, raw_turns: list[list[Any]], native: bool
    ) -> tuple[bool, str | None]:
        """(valid, error_type) as the official runner records them for this result."""
        if len(raw_turns) != len(entry.ground_truth):
            return False, "multi_turn:force_terminated"
        decoded_turns = []
        for raw_steps in raw_turns:
            steps = []
            for raw in raw_steps:
                try:
                    calls = self.decode_fc(raw) if native else self.decode_text(raw)
                    if self.utils.is_empty_execute_response(calls):
                        continue
                    steps.append(calls)
                except Exception:  # noqa: BLE001 - the official runner skips any failed decoding
                    continue
            decoded_turns.append(steps)
        test_entry = {
            "id": entry.id,
            "initial_config": copy.deepcopy(entry.initial_config),
            "involved_classes": list(entry.involved_classes),
        }
        try:
            result = self.checker(decoded_turns, entry.ground_truth, test_entry, entry.category, MODEL)
        finally:
            self._forget_instances()
        return bool(result["valid"]), None if result["valid"] else result["error_type"]

    def _forget_instances(self) -> None:
        names = [name for name in vars(self.utils) if name.startswith(MODEL)]
        for name in names:
            del vars(self.utils)[name]
