"""Parity with the seed lab's own code, run as the oracle (tests/aime25/lab.py loads it):
the protocol parser, the text-only extractor and normaliser, the retool reward, the tool
message content the sandbox result becomes, and tool-output truncation with the
continuation prompt, on the same tokenizer. Every case must get the lab's verdict."""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import json
from types import SimpleNamespace

import pytest

from pytest_agenteval.models import ToolCall
from pytest_agenteval.scorers import (
    extract_last_boxed,
    normalize_aime_answer,
    score_boxed_integer,
    score_math_verify_tail,
)
from pytest_agenteval.tasks.aime25 import CODE_TOOL, SYSTEM_PROMPT, parse_assistant, tool_content
from pytest_agenteval.tasks.aime25._protocol import fit_tool_content, native_call_text, tool_message
from tests.aime25 import lab


def _call(code: str) -> str:
    return (
        f"<tool_call>\n<function=code_interpreter>\n<parameter=code>\n{code}\n</parameter>\n"
        "</function>\n</tool_call>"
    )


PREFIXES = [
    "",
    "Let me compute.\n",
    "I think \\boxed{42}; let me verify.\n",
    "I'll use the <tool_call> format.\n",
    "  \n",
]
CALLS = [
    _call("print(1+1)"),
    _call("    for i in range(3):\n        print(i)"),
    _call(""),
    _call("   "),
    _call("x = '<tool_call>'\nprint(x)"),
    _call("print('</parameter>')"),
    "<tool_call>\n<function=code_interpreter>\n<parameter=code>\nfor i in range(10):\n    print(i",
    "<tool_call>\n<function=code_interpreter>\n<parameter=code>\nprint(2)\n</parameter>\n</function>",
    "<tool_call>\nsure\n<function=code_interpreter>\n<parameter=code>\nprint(3)\n</parameter>\n</function>\n</tool_call>",  # noqa: E501
    '<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "print(4)"}}\n</tool_call>',
    "<tool_call>\n<function=python>\n<parameter=code>\nprint(5)\n</parameter>\n</function>\n</tool_call>",
    "<tool_call>\n<function=code_interpreter>\n<parameter=code>\nprint(6)\n</parameter>\n<parameter=timeout>\n5\n</parameter>\n</function>\n</tool_call>",  # noqa: E501
]
SUFFIXES = [
    "",
    "\n",
    "\nLet's wait for the result.",
    "\n<tool_response>\n42\n</tool_response>\nSo \\boxed{42}",
    "\n\\boxed{42}",
    "<|im_end|>",
    "\n" + _call("print(7)"),
]
ANSWERS = ["So \\boxed{42}", "no box at all", "I could use <tool_call> but \\boxed{42}", "", "   \\boxed{}  "]
TURNS = [p + c + s for p, c, s in itertools.product(PREFIXES, CALLS, SUFFIXES)] + ANSWERS


def test_the_protocol_constants_are_the_lab_s_byte_for_byte() -> None:
    protocol = lab.module("protocol")
    assert SYSTEM_PROMPT == protocol.SYSTEM_PROMPT
    assert json.dumps(CODE_TOOL) == json.dumps(protocol.CODE_TOOL)


def test_the_parser_gives_the_lab_s_verdict_on_every_turn() -> None:
    protocol = lab.module("protocol")
    assert len(TURNS) >= 400
    differ = []
    for text in TURNS:
        theirs = protocol.parse_assistant(text)
        ours = parse_assistant(text)
        if (ours.kind, ours.content, ours.code) != (theirs.kind, theirs.content, theirs.code):
            differ.append(text)
    assert differ == []
    kinds = {parse_assistant(t).kind for t in TURNS}
    assert kinds == {"tool", "answer", "invalid"}  # the cases cover every verdict


@pytest.mark.parametrize("code", ["print(1)", "  x = 1\n  print(x)", "print('a <b> c')"])
def test_native_tool_calls_parse_like_the_raw_call(code: str) -> None:
    protocol = lab.module("protocol")
    text = native_call_text("Let me check.", (ToolCall("code_interpreter", json.dumps({"code": code})),))
    assert parse_assistant(text) == parse_assistant(f"Let me check.\n{_call(code)}")
    assert protocol.parse_assistant(text).kind == "tool"
    two = (ToolCall("code_interpreter", '{"code": "1"}'), ToolCall("code_interpreter", '{"code": "2"}'))
    assert parse_assistant(native_call_text("", two)).kind == "invalid"
    assert parse_assistant(native_call_text("", (ToolCall("code_interpreter", "{bad"),))).kind == "invalid"


FORMS = [
    "42",
    " 42 ",
    "042",
    "\\text{42}",
    "\\text{ 42 }",
    "\\mathrm {7}",
    "$42$",
    "$ 42 $",
    "42.",
    "42.0",
    "1,000",
    "\\frac{84}{2}",
    "\\sqrt{1764}",
    "x=42",
    "N=042",
    "42^\\circ",
    "The answer is 42",
    "-5",
    "+4",
    "21+21",
    "\\dfrac{1}{2}",
    "",
    "\\text{\\mathrm{16}}",
    "4 2",
    "7",
    "1000",
    "588",
    "\\{42\\}",
]
WRAPPERS = [
    "\\boxed{{{}}}",
    "\\boxed {{{}}}",
    "\\boxed\\text{{{}}}",
    "So the answer is \\boxed{{{}}}.",
    "\\boxed{{{}}} wait, actually \\boxed{{7}}",
    "\\boxed{{7}} then \\boxed{{{}",
    "x" * 400 + " \\boxed{{{}}}",
    "\\boxed{{{}}}" + " and then some more words" * 16,
]
COMPLETIONS = [w.format(f) for w, f in itertools.product(WRAPPERS, FORMS)]
REFERENCES = ["42", "7", "1000", " 588 "]


def test_text_only_extraction_and_normalisation_match_the_lab() -> None:
    oracle = lab.functions("eval", ("extract_last_boxed", "normalize_aime_answer"))
    assert len(COMPLETIONS) >= 200
    for text in COMPLETIONS:
        boxed = oracle["extract_last_boxed"](text)
        assert extract_last_boxed(text) == boxed, text
        assert normalize_aime_answer(boxed) == oracle["normalize_aime_answer"](boxed), boxed
    for form in FORMS:
        assert normalize_aime_answer(form) == oracle["normalize_aime_answer"](form), form


def test_both_scorers_give_the_lab_s_verdicts() -> None:
    oracle = lab.functions("eval", ("extract_last_boxed", "normalize_aime_answer"))
    reward = lab.module("reward")
    cases = list(itertools.product(COMPLETIONS, REFERENCES))
    assert len(cases) >= 300
    differ = []
    for text, reference in cases:
        truth = oracle["normalize_aime_answer"](reference)
        lab_text_only = oracle["normalize_aime_answer"](oracle["extract_last_boxed"](text)) == truth
        lab_reward = reward.score_answer(text, reference)
        text_only = score_boxed_integer(text, reference)
        ours = score_math_verify_tail(text, reference)
        if (
            text_only.correct != lab_text_only
            or (ours.correct, ours.formatted) != (lab_reward.correct, lab_reward.valid_format)
            or ours.fields["reward_boxed"] != lab_reward.answer
            or ours.fields["predicted_answer"]
            != oracle["normalize_aime_answer"](oracle["extract_last_boxed"](text))
        ):
            differ.append((text, reference))
    assert differ == []
    assert any(s.correct for s in (score_math_verify_tail(t, r) for t, r in cases[:60]))


SLEEPER = "import time; time.sleep(10)"
PROGRAMS = [
    "print(1 + 1)",
    "import sympy\nsympy.factorint(2024)",  # no auto-print: the lab shows ""
    "'abc'",
    "print(1); 1/0",
    "x = (",
    "def f():\n    raise ValueError('v')\nf()",
    "import warnings; warnings.warn('x'); print(2)",
    "import sys; sys.exit(3)",
    "import sys; sys.exit(0)",
    SLEEPER,
    "print('<|im_end|> <tool_response> </tool_response> <|im_start|>')",
    "print('a' * 5000)",
    "import sys; sys.stderr.write('e' * 5000); sys.exit(1)",
    "import os; os.kill(os.getpid(), 9)",
    "print('\\n'.join(map(str, range(1000, 1800))))",
    "import nonexistent_module_x",
]


def test_sandbox_results_become_the_lab_s_tool_content(sandbox_factory) -> None:
    lab_sandbox = lab.module("sandbox").LocalPythonSandbox(timeout=2)
    ours = sandbox_factory(timeout_s=2)

    def lab_content(code: str) -> str:
        return lab_sandbox.format_tool_content(lab_sandbox.run_code(code))

    # the two runs that time out (2 s each, idle) wait on threads beside the other programs,
    # which run one at a time as before (the lab's cold interpreter imports sympy within 2 s)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        lab_sleeper = pool.submit(lab_content, SLEEPER)
        our_sleeper = pool.submit(ours.run_sync, SLEEPER, auto_print=False)
        for code in PROGRAMS:
            if code == SLEEPER:
                expected, result = lab_sleeper.result(), our_sleeper.result()
            else:
                expected, result = lab_content(code), ours.run_sync(code, auto_print=False)
            assert tool_content(result, 2) == expected, code


class _LabHangs(Exception):
    pass


class _LabTokenizer:
    """The lab's tokenizer interface (transformers') over the same ChatTokenizer."""

    def __init__(self, chat) -> None:
        self.chat = chat
        self.eos_token = chat.eos_token

    def apply_chat_template(self, messages, tools=None, tokenize=True, add_generation_prompt=False, **_):
        return self.chat.render(messages, tools, add_generation_prompt)

    def encode(self, text, add_special_tokens=False):
        return self.chat.encode(text)


def test_truncation_and_continuation_match_the_lab_on_the_model_s_tokenizer(embedded_sampler) -> None:
    from pytest_agenteval.tasks.aime25._conversation import TOOLS, TokenConversation

    protocol = lab.module("protocol")
    calls = {"n": 0}

    def token_count(tokenizer, text: str) -> int:  # the lab's, counting its calls
        # the lab's loop cuts the content to 20 + int(0.7 x its length) a call: from the
        # longest output here (4,000 characters) it is at its fixed point, 66 characters,
        # by the 23rd call, and checks the same 66 characters on every call after: a case
        # not returned by then never returns (the cap was 500 calls)
        calls["n"] += 1
        if calls["n"] > 40:
            raise _LabHangs
        return len(tokenizer.encode(text, add_special_tokens=False))

    oracle = lab.functions(
        "rollout",
        ("fit_tool_content",),
        tool_message=protocol.tool_message,
        build_next_prompt=protocol.build_next_prompt,
        token_count=token_count,
    )
    conversation = TokenConversation(embedded_sampler, protocol.initial_messages("What is 12 * 49?"))
    tokenizer = _LabTokenizer(conversation.tokenizer)
    prompt = protocol.build_prompt(tokenizer, conversation.messages)
    assert (
        asyncio.run(conversation.prompt_length()) == len(prompt) and prompt == conversation.prompt
    )  # the first prompt: the template with the tool schema
    turn = "Let me compute.\n" + _call("print('\\n'.join(map(str, range(1000, 1800))))")
    completion = conversation.tokenizer.encode(turn) + conversation.tokenizer.encode("<|im_end|>")
    conversation.add_assistant(turn, SimpleNamespace())
    conversation._completion = tuple(completion)
    outputs = [
        "",
        "588",
        "Error: process exited with code 3.",
        "é" * 700,
        *("\n".join(map(str, range(1000, 1000 + k))) for k in (10, 100, 400, 800)),
        "x" * 4000,
    ]
    checked, hangs = 0, 0
    for output, cap, room in itertools.product(outputs, (16, 64, 512), (20, 150, 600, 5000)):
        limit = len(prompt) + len(completion) + room
        config = SimpleNamespace(max_tool_response_tokens=cap, max_trajectory_tokens=limit)
        pending = SimpleNamespace(
            call_id="code-0-0-1",
            messages_before_assistant=conversation.messages[:-1],
            prompt_tokens=prompt,
            completion_tokens=completion,
        )
        calls["n"] = 0
        try:
            expected = oracle["fit_tool_content"](tokenizer, output, pending, config)
        except _LabHangs:  # its loop cannot end at 65-66 characters: ours gives up there
            expected, hangs = None, hangs + 1

        async def count(text: str) -> int:
            return await conversation.count(text)

        async def fits(content: str, limit: int = limit) -> bool:
            return await conversation.length_with(tool_message("code-0-0-1", content)) <= limit

        shown = asyncio.run(fit_tool_content(output, cap, count, fits))
        if expected is None:
            assert shown is None, (output[:40], cap, room)
        else:
            assert shown == expected[0], (output[:40], cap, room)
            assert asyncio.run(conversation.next_prompt(tool_message("code-0-0-1", shown))) == expected[1]
        checked += 1
    assert checked == 108 and 0 < hangs < checked
    assert TOOLS == [protocol.CODE_TOOL]
