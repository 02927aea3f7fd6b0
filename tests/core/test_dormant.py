"""The plugin is installed for every pytest run in the environment: in a run that is not
an evaluation it checks nothing, writes nothing and changes no exit status."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agenteval.plugin.items import declares_suite


def test_an_ordinary_project_is_left_alone(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_ok():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest_inprocess("--model-path=missing.gguf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # an explicit agenteval option means: evaluate
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=1)
    assert "= agenteval =" not in result.stdout.str() and "results:" not in result.stdout.str()
    assert not (pytester.path / "agenteval-results").exists()


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("agenteval_suite = Aime25()\n", True),
        ("from x import S\nagenteval_suite: S = S()\n", True),
        ('SUITE = """\nagenteval_suite = Aime25()\n"""\n', False),  # only inside a string
        ("def f():\n    agenteval_suite = 1\n", False),  # not at module level
        ("agenteval_suite = (\n", False),  # does not parse
        ("x = 1\n", False),
    ],
)
def test_declares_suite(tmp_path: Path, source: str, expected: bool) -> None:
    path = tmp_path / "test_x.py"
    path.write_text(source)
    assert declares_suite(path) is expected


def test_xdist_scheduling_is_untouched_outside_evaluations(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_plain="import pytest\n@pytest.mark.parametrize('i', range(4))\ndef test_ok(i):\n    pass\n"
    )
    result = pytester.runpytest_inprocess("-n", "2", "-v")
    result.stdout.fnmatch_lines(["*scheduling tests via LoadScheduling*"])


GC_INTROSPECTION = """
import gc
import json


def test_the_module_dict_refers_to_its_function():
    assert any(r is vars(json) for r in gc.get_referrers(json.dumps))


def test_the_plugin_manager_is_a_tracked_object(request):
    assert any(o is request.config.pluginmanager for o in gc.get_objects())
"""


def test_gc_introspection_is_untouched_outside_evaluations(pytester: pytest.Pytester) -> None:
    """The plugin leaves the garbage collector as it is (a gc.freeze() at import, tried for
    start-up, hid every object then alive from gc.get_objects() and gc.get_referrers()):
    a process of its own, where the plugin is imported afresh."""
    pytester.makepyfile(test_users=GC_INTROSPECTION)
    pytester.runpytest_subprocess().assert_outcomes(passed=2)
    pytester.runpytest_subprocess("-n", "2").assert_outcomes(passed=2)
