"""The option table is the one declaration of every option: the ini keys pytest registers,
`Settings` and docs/options.md all follow from it; each option has one ini key, the flag's
own name."""

from __future__ import annotations

import ast
import dataclasses
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_agenteval.config import settings as settings_module
from pytest_agenteval.config.options import OPTIONS, Settings, build_settings
from pytest_agenteval.config.reference import COMMAND, render

ROOT = Path(__file__).resolve().parents[2]

# ini keys that common plugins not installed here register (their `parser.addini` calls)
OTHER_PLUGINS_INI = {
    "pytest-timeout": {
        "timeout",
        "timeout_method",
        "timeout_func_only",
        "timeout_disable_debugger_detection",
    },
    "pytest-rerunfailures": {"reruns", "reruns_delay", "reruns_except", "only_rerun"},
    "pytest-retry": {"retries", "retry_delay", "cumulative_timing"},
    "pytest-env": {"env"},
    "pytest-dotenv": {"env_files", "env_override_existing_values"},
    "pytest-mock": {"mock_traceback_monkeypatch", "mock_use_standalone_module"},
    "pytest-django": {"DJANGO_SETTINGS_MODULE", "DJANGO_CONFIGURATION", "django_find_project"},
    "pytest-html": {"render_collapsed", "max_asset_filename_length", "environment_table_redact_list"},
    "pytest-bdd": {"bdd_features_base_dir"},
    "pytest-memray": {"memray", "most_allocations", "hide_memray_summary", "stacks", "native"},
}


# The `pytest --help` groups, in order: one a concept a user recognizes
HELP_GROUPS = ("model", "sampling", "reasoning", "run", "output and gates", "cost", "cluster", "suites")


def _settings(pytester: pytest.Pytester, ini: str, *args: str) -> tuple[Settings, list[str]]:
    """Settings read from a real pytest config (ini file and command line), and the warnings
    pytest recorded while they were read, as `Category: message`."""
    pytester.makeini("[pytest]\n" + ini)
    config = pytester.parseconfig(*args)
    recorded: list[str] = []

    class Recorder:
        def pytest_warning_recorded(self, warning_message: Warning, when: str) -> None:
            recorded.append(f"{warning_message.category.__name__}: {warning_message.message}")  # type: ignore[attr-defined]

    config.pluginmanager.register(Recorder())
    return build_settings(config), recorded


def test_every_ini_key_is_its_flags_name(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfig()
    keys = {option.flag: option.ini for option in OPTIONS}
    assert keys == {option.flag: option.flag[2:].replace("-", "_") for option in OPTIONS}
    assert keys["--agenteval-gate"] == "agenteval_gate"
    assert keys["--endpoint"] == "endpoint"
    assert keys["--val-n"] == "val_n"
    assert keys["--strict-adapter"] == "strict_adapter"
    for option in OPTIONS:  # registered with pytest under that name, unset: the table's default
        assert config.getini(option.ini) is None, option.ini


def test_no_ini_key_collides_with_pytest_or_a_common_plugin(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfig("-p", "no:agenteval")  # pytest and every other installed plugin
    assert config.pluginmanager.is_blocked("agenteval")
    ours = [option.ini for option in OPTIONS]
    taken = []
    for key in ours:
        try:
            config.getini(key)
            taken.append(key)
        except ValueError:  # unknown to everyone else: free
            pass
    assert taken == []
    assert {plugin: keys & set(ours) for plugin, keys in OTHER_PLUGINS_INI.items() if keys & set(ours)} == {}
    assert len(set(ours)) == len(ours)


def test_an_agenteval_prefixed_key_is_no_ini_key_of_ours(pytester: pytest.Pytester) -> None:
    """No release ever had `agenteval_val_n`: pytest calls it unknown and it sets nothing."""
    pytester.makeini("[pytest]\nagenteval_val_n = 3\nasyncio_default_fixture_loop_scope = function\n")
    config = pytester.parseconfig()
    assert build_settings(config).val_n == next(o.default for o in OPTIONS if o.flag == "--val-n")
    assert "agenteval_val_n" in config._get_unknown_ini_keys()


def test_new_ini_key_works_silently(pytester: pytest.Pytester) -> None:
    settings, warnings = _settings(
        pytester,
        "val_n = 3\nagenteval_gate =\n    aime25.average_at_n >= 0.5\nendpoint =\n"
        "    http://a:8000/v1\n    http://b:8000/v1\nserve = true\ntop_p = 0.5\nmode = text-only\n",
    )
    assert (settings.val_n, settings.gates) == (3, ("aime25.average_at_n >= 0.5",))
    assert settings.endpoints == ("http://a:8000/v1", "http://b:8000/v1")
    assert (settings.serve, settings.top_p, settings.mode) == (True, 0.5, "text-only")
    assert settings.explicit == frozenset({"val_n", "gates", "endpoints", "serve", "top_p", "mode"})
    assert warnings == []


def test_command_line_overrides_the_ini(pytester: pytest.Pytester) -> None:
    settings, warnings = _settings(
        pytester,
        "val_n = 3\nendpoint = http://a:8000/v1\nmode = text-only\n",
        "--val-n=5",
        "--endpoint=http://b:8000/v1",
    )
    assert (settings.val_n, settings.endpoints, settings.mode) == (5, ("http://b:8000/v1",), "text-only")
    assert warnings == []


def test_a_bad_ini_value_names_the_ini_key(pytester: pytest.Pytester) -> None:
    with pytest.raises(pytest.UsageError) as error:
        _settings(pytester, "val_n = many\n")
    assert str(error.value) == "ini key val_n: 'many' is not a valid int"


def test_settings_has_one_attribute_per_option_with_its_default() -> None:
    names = [field.name for field in dataclasses.fields(Settings)]
    # model_path: the one --model-path of a one-model run (build_settings derives it)
    assert names == [option.dest for option in OPTIONS] + ["model_path", "explicit"]
    defaults = Settings()
    assert {option.dest: getattr(defaults, option.dest) for option in OPTIONS} == {
        option.dest: option.default for option in OPTIONS
    }
    assert (defaults.val_n, defaults.top_p, defaults.gates, defaults.model_path) == (12, 0.7, (), None)
    assert defaults.explicit == frozenset()


def test_settings_are_frozen_comparable_and_picklable() -> None:
    settings = Settings(val_n=3, gates=("aime25.average_at_n >= 0.5",), explicit=frozenset({"val_n"}))
    assert pickle.loads(pickle.dumps(settings)) == settings
    assert settings != Settings()
    assert dataclasses.replace(settings, val_n=4).val_n == 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.val_n = 5  # type: ignore[misc]
    assert "explicit" not in settings.as_dict() and settings.as_dict()["val_n"] == 3
    assert (settings.effective_scorer, Settings(mode="text-only").effective_scorer) == (
        "math-verify-tail",
        "boxed-integer",
    )


def test_what_type_checkers_see_is_the_generated_settings() -> None:
    """settings.py declares Settings for type checkers under TYPE_CHECKING; it must list
    exactly the generated attributes, with the same types."""
    tree = ast.parse(Path(settings_module.__file__).read_text(encoding="utf-8"))
    (guard,) = [n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"]
    (declared,) = [n for n in guard.body if isinstance(n, ast.ClassDef) and n.name == "Settings"]
    annotations = {
        statement.target.id: eval(ast.unparse(statement.annotation), {})  # our own file's types
        for statement in declared.body
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
    }
    assert annotations == Settings.__annotations__


def test_docs_options_md_is_what_the_generator_prints() -> None:
    printed = subprocess.run(
        [sys.executable, "-m", "pytest_agenteval.config.reference"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert printed == render()
    written = (ROOT / "docs" / "options.md").read_text(encoding="utf-8")
    assert written == printed, f"docs/options.md is stale; regenerate it: {COMMAND}"


def test_the_reference_lists_every_option_under_its_topic() -> None:
    text = render()
    assert text.count("\n| `--") == len(OPTIONS)
    assert (
        "| `--val-n` | `val_n` | int | `12` | aime25 in retool mode, aime25 in text-only mode, bfcl, gaia "
        "| generations per problem (N); BFCL and GAIA: 1 unless given |"
    ) in text
    assert "| `--seed` | `seed` | int | `42` | all |" in text
    assert "agenteval_gates" not in text  # one ini key per option, no renamed twins
    assert text.index("\n## Sampling\n") < text.index("`--val-n`") < text.index("\n## Run\n")
    # the finer topics are sub-headings of their --help group's section
    assert text.index("\n## Run\n") < text.index("\n### Problem selection\n") < text.index("\n## Output")
    assert text.index("\n## Suites\n") < text.index("\n### AIME 2025\n")
    sections = [line[3:] for line in text.splitlines() if line.startswith("## ")]
    assert sections == [group.capitalize() for group in HELP_GROUPS]


def test_pytest_help_shows_each_default(pytester: pytest.Pytester) -> None:
    """`pytest --help` said nothing of what --val-n, --max-tokens, --temperature and
    --concurrency default to, nor that BFCL and GAIA take N = 1."""
    result = pytester.runpytest("--help")
    text = " ".join(result.stdout.str().split())  # argparse wraps help to the terminal's width
    for shown in (
        "--val-n=AGENTEVAL_VAL_N generations per problem (N); BFCL and GAIA: 1 unless given (default: 12)",
        # the suites with their own defaults say so (the help gave 8192 and 1.0 for all)
        "--max-tokens=AGENTEVAL_MAX_TOKENS max new tokens per completion; BFCL: 1024, datagen: 512 "
        "unless given (default: 8192)",
        "--temperature=AGENTEVAL_TEMPERATURE sampling temperature; BFCL: 0.001, GAIA and datagen: 0.0 "
        "unless given (default: 1.0)",
        "(a localhost endpoint: per machine, shared by the workers there) (default: 32)",
    ):
        assert shown in text, shown


def _help_groups(help_text: str) -> dict[str, list[str]]:
    """The agenteval groups of `pytest --help`, in order: heading -> the flags listed under it."""
    groups: dict[str, list[str]] = {}
    flags: list[str] | None = None
    for line in help_text.splitlines():
        if line and not line[0].isspace():  # a heading (or pytest's usage and closing lines)
            flags = groups.setdefault(line[:-1], []) if line.startswith("agenteval: ") else None
        elif flags is not None and line.startswith("  --"):
            flags.append(line.split()[0].split("=")[0])
    return groups


def test_pytest_help_lists_the_options_in_eight_groups(pytester: pytest.Pytester) -> None:
    """`pytest --help` listed every option in one group, in 18 topics cut by file size
    (--presence-penalty among the presets, --thinking among the model's options): now one
    group per concept, in the table's order, each flag in exactly one."""
    result = pytester.runpytest("--help")
    groups = _help_groups(result.stdout.str())
    assert list(groups) == [f"agenteval: {group}" for group in HELP_GROUPS]
    assert "--presence-penalty" in groups["agenteval: sampling"]
    assert "--agenteval-preset" in groups["agenteval: sampling"]
    assert groups["agenteval: reasoning"] == ["--thinking", "--think-tags"]
    assert "--batch" in groups["agenteval: cost"] and "--max-cost" in groups["agenteval: cost"]
    assert "--agenteval-gate" in groups["agenteval: output and gates"]
    listed = [flag for flags in groups.values() for flag in flags]
    assert listed == [option.flag for option in OPTIONS]
