"""A scripted model for the retool benchmark: call the tool once, then answer with what
it printed. Served by `python -m pytest_agenteval.testing.openai_server --script
benchmarks.scripted_tool_model:MODEL` (run from the repository root)."""

from pytest_agenteval.testing import Reply, ScriptedToolModel

MODEL = ScriptedToolModel(
    [
        Reply(
            text="Let me compute.",
            tool_calls=[{"name": "code_interpreter", "arguments": {"code": "print(7 * 10)"}}],
        ),
        lambda observation, body: f"The tool printed {(observation or '').strip()}, so \\boxed{{70}}.",
    ]
)
