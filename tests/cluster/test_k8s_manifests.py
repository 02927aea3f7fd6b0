"""The Kubernetes recipe, examples/k8s/indexed-job.yaml and merge-job.yaml, checked without a
cluster (none is available to the tests): the YAML parses into the objects the recipe needs
(an Indexed Job, one GPU a pod, a ReadWriteMany volume the merge shares), and every option
of the shard's pytest command line goes through the plugin's own parser and settings, so a
renamed or retyped option fails here instead of in a user's cluster."""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.config.options import build_settings
from pytest_agenteval.config.settings import Settings
from pytest_agenteval.output.gate import parse_gate
from pytest_agenteval.plugin.shards import parse_shard
from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests._oracle import require_oracle
from tests.cluster._recipes import ANSWERS, REPO, child_environment
from tests.conftest import SUITE_FILE, TINY_PROBLEMS, read_results, write_jsonl

try:
    import yaml
except ImportError:  # installed by README command 1 (huggingface_hub requires it)
    yaml = None


@pytest.fixture(scope="module", autouse=True)
def _yaml_installed() -> None:
    if yaml is None:
        require_oracle(
            "PyYAML is not installed: pip install -e '.[all]' (README command 1) to check the Kubernetes "
            "manifests"
        )


K8S = REPO / "examples" / "k8s"
INDEX = "$(JOB_COMPLETION_INDEX)"


def objects(name: str) -> dict[str, dict[str, Any]]:
    """The manifest's objects by kind (each kind at most once in these files)."""
    loaded = [
        document for document in yaml.safe_load_all((K8S / name).read_text(encoding="utf-8")) if document
    ]
    by_kind = {document["kind"]: document for document in loaded}
    assert len(by_kind) == len(loaded), f"{name}: two objects of one kind"
    return by_kind


def only_container(job: dict[str, Any]) -> dict[str, Any]:
    (container,) = job["spec"]["template"]["spec"]["containers"]
    return container


def claim_at(job: dict[str, Any], mount_path: str) -> str:
    """The PersistentVolumeClaim the job's container mounts at `mount_path`."""
    pod = job["spec"]["template"]["spec"]
    (mount,) = [mount for mount in only_container(job)["volumeMounts"] if mount["mountPath"] == mount_path]
    (volume,) = [volume for volume in pod["volumes"] if volume["name"] == mount["name"]]
    return volume["persistentVolumeClaim"]["claimName"]


def shard_settings(pytester: pytest.Pytester, args: list[str]) -> Settings:
    """The settings a shard's pytest builds from `args`: pytest's parser with every plugin
    installed (ours and xdist's), then the plugin's own reading of its options (types,
    choices). Raises pytest.UsageError as pytest itself would at start-up."""
    config = pytester.parseconfig(*args)
    return build_settings(config)


def shard_args(job: dict[str, Any], index: int) -> list[str]:
    """The shard's pytest arguments in pod `index`, as the kubelet expands `$(VAR)`."""
    container = only_container(job)
    assert container["command"] == ["python", "-m", "pytest"]
    return [arg.replace(INDEX, str(index)) for arg in container["args"]]


@pytest.fixture(scope="module")
def shards_job() -> dict[str, Any]:
    return objects("indexed-job.yaml")["Job"]


def test_the_indexed_job_runs_one_shard_a_pod_each_on_one_gpu(shards_job: dict[str, Any]) -> None:
    spec = shards_job["spec"]
    pod = spec["template"]["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 4, 4)
    assert pod["restartPolicy"] == "Never"  # what backoffLimitPerIndex requires
    assert only_container(shards_job)["resources"]["limits"] == {"nvidia.com/gpu": 1}


def test_results_and_cache_are_on_one_read_write_many_volume_the_merge_mounts_too(
    shards_job: dict[str, Any],
) -> None:
    claim = objects("indexed-job.yaml")["PersistentVolumeClaim"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    merge_job = objects("merge-job.yaml")["Job"]
    assert claim_at(shards_job, "/shared") == claim_at(merge_job, "/shared") == claim["metadata"]["name"]
    assert "nvidia.com/gpu" not in str(only_container(merge_job)["resources"])


def test_every_variable_the_args_name_is_declared_in_env(shards_job: dict[str, Any]) -> None:
    """The kubelet expands `$(NAME)` only for a variable in the container's env; any other
    stays as written, and every shard would write the same file."""
    container = only_container(shards_job)
    named = {name for arg in container["args"] for name in re.findall(r"\$\((\w+)\)", arg)}
    declared = {variable["name"] for variable in container["env"]}
    assert named == {"JOB_COMPLETION_INDEX"}
    assert named <= declared
    (index,) = [variable for variable in container["env"] if variable["name"] == "JOB_COMPLETION_INDEX"]
    assert index["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    )


@pytest.mark.parametrize("index", [0, 3])
def test_the_shard_command_line_is_one_the_plugin_accepts(
    pytester: pytest.Pytester, shards_job: dict[str, Any], index: int
) -> None:
    args = shard_args(shards_job, index)
    settings = shard_settings(pytester, args)
    assert settings.out == f"/shared/results/shard-{index}.jsonl"
    assert settings.cache_dir == "/shared/cache"
    assert (settings.model_path, settings.serve) == ("/shared/checkpoints/step-800", True)
    assert [parse_gate(gate).suite for gate in settings.gates] == ["aime25"]
    # what `auto` resolves to in pod `index`: the Job's completions are the shard count
    pod_environment = {"JOB_COMPLETION_INDEX": str(index)}
    assert parse_shard(settings.shard, settings.shard_count, pod_environment) == (index, 4)
    suites = [arg for arg in args if not arg.startswith("-") and arg != "4"]
    assert suites == ["suites/aime25"] and (REPO / suites[0]).is_dir()


@pytest.mark.parametrize(
    ("change", "unknown"),
    [
        (("--agenteval-cache-dir=", "--agenteval-cache="), "--agenteval-cache=/shared/cache"),
        (("--serve", "--serve-model"), "--serve-model"),
        (("--model-path=", "--model="), "--model=/shared/checkpoints/step-800"),
    ],
)
def test_a_renamed_option_in_the_manifest_fails_the_check(
    pytester: pytest.Pytester, shards_job: dict[str, Any], change: tuple[str, str], unknown: str
) -> None:
    old, new = change
    args = [arg.replace(old, new, 1) if arg.startswith(old) else arg for arg in shard_args(shards_job, 0)]
    assert args != shard_args(shards_job, 0)
    with pytest.raises(pytest.UsageError) as refused:
        shard_settings(pytester, args)
    (line,) = [line for line in str(refused.value).splitlines() if "unrecognized arguments:" in line]
    assert line.partition("unrecognized arguments: ")[2].split() == [unknown]


def test_a_shard_count_that_is_not_a_number_fails_the_check(
    pytester: pytest.Pytester, shards_job: dict[str, Any]
) -> None:
    args = [
        "--agenteval-shard-count=four" if arg.startswith("--agenteval-shard-count=") else arg
        for arg in shard_args(shards_job, 0)
    ]
    with pytest.raises(pytest.UsageError, match="^--agenteval-shard-count: 'four' is not a valid int$"):
        shard_settings(pytester, args)


def merge_argv() -> list[str]:
    """The merge pod's command, as its shell splits it (before the glob)."""
    container = only_container(objects("merge-job.yaml")["Job"])
    assert container["command"] == ["/bin/sh", "-c"]
    (script,) = container["args"]
    words = shlex.split(script)
    assert words[:3] == ["exec", "pytest-agenteval", "merge"]
    return words[3:]


def test_the_merge_reads_every_shard_and_writes_beside_them(shards_job: dict[str, Any]) -> None:
    argv = merge_argv()
    patterns = [word for word in argv if "*" in word]
    assert patterns == ["/shared/results/shard-*.jsonl"]
    shard_files = [
        shard_settings_out(shards_job, index) for index in range(shards_job["spec"]["completions"])
    ]
    assert all(fnmatch.fnmatch(path, patterns[0]) for path in shard_files)
    output = argv[argv.index("-o") + 1]
    assert output == "/shared/results/merged.jsonl"
    assert not fnmatch.fnmatch(output, patterns[0])  # a rerun of the merge does not read its own output
    assert [
        parse_gate(argv[i + 1]).expression for i, word in enumerate(argv) if word == "--agenteval-gate"
    ] == ["aime25.average_at_n >= 0.30"]


def shard_settings_out(job: dict[str, Any], index: int) -> str:
    (out,) = [arg for arg in shard_args(job, index) if arg.startswith("--agenteval-out=")]
    return out.partition("=")[2]


def test_the_merge_jobs_command_merges_shards_run_with_the_indexed_jobs_options(
    pytester: pytest.Pytester, shards_job: dict[str, Any]
) -> None:
    """What a cluster would do, minus the cluster: four pytest processes, each with pod I's
    `--agenteval-*` options from the manifest and `JOB_COMPLETION_INDEX=I` in its
    environment (the suite, model and server swapped for a tiny suite on the package's test
    server), then the merge pod's shell command as written, `/shared` moved to a folder here.
    Each shard exits 0 though two problems are unsolved (the manifest's completeness gate),
    and the merge's gate holds on the four shards together."""
    shared = pytester.path / "shared"
    (shared / "results").mkdir(parents=True)
    pytester.makepyfile(test_tiny=SUITE_FILE)
    data = write_jsonl(pytester.path / "tiny_aime.jsonl", TINY_PROBLEMS)
    environ = child_environment()
    with OpenAITestServer(ServerConfig(answers=ANSWERS, answer="no idea")) as server:
        shards = []
        for index in range(shards_job["spec"]["completions"]):
            own = [arg.replace("/shared", str(shared)) for arg in shard_args(shards_job, index)]
            command = [sys.executable, "-m", "pytest", "test_tiny.py", "-p", "no:cacheprovider"]
            command += [f"--endpoint={server.url}", f"--dataset-path={data}", "--mode=text-only", "--val-n=2"]
            command += [arg for arg in own if arg.startswith("--agenteval-")]
            shards.append(
                subprocess.Popen(
                    command,
                    cwd=pytester.path,
                    env={**environ, "JOB_COMPLETION_INDEX": str(index)},
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
            )
        outputs = [shard.communicate(timeout=300)[0] for shard in shards]
        requests = len(server.requests)
    assert [shard.returncode for shard in shards] == [0, 0, 0, 0], "\n".join(outputs)
    assert requests == 8  # 4 problems x 2 samples, each in one shard only
    script = only_container(objects("merge-job.yaml")["Job"])["args"][0].replace("/shared", str(shared))
    environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), environ["PATH"]])
    merge = subprocess.run(
        ["/bin/sh", "-c", script], env=environ, capture_output=True, text=True, timeout=300
    )
    assert merge.returncode == 0, merge.stdout + merge.stderr
    problems, (summary,) = read_results(shared / "results" / "merged.jsonl")
    assert [problem["num_correct"] for problem in problems] == [2, 2, 0, 0]
    assert (summary["average_at_n"], summary["complete"]) == (0.5, True)
    assert (shared / "results" / "merged.xml").is_file()
