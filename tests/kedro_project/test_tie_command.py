"""The "to decide the tie" command a tied comparison prints is runnable as printed: its environment,
pipeline and ``--params`` pass the run's own parameter check (what a ``kedro run`` checks before any node)."""

import shlex

import pytest

from bert_kd.experiment.run_setup import RunCommand, record_run_command
from bert_kd.pipelines.registration import decide_tie
from tests.conftest import REPO_ROOT


@pytest.mark.slow  # loads the project's pipelines and configuration: 55 s on the busy 2-core machine
def test_the_printed_tie_command_passes_the_runs_parameter_check(monkeypatch):
    from kedro.framework.cli.utils import _split_params
    from kedro.framework.project import pipelines, settings
    from kedro.framework.startup import bootstrap_project

    from bert_kd.kedro_project.hooks import check_run_parameters

    record_run_command(RunCommand("compare", {"glue_dir": "../shared/glue", "tracking.enabled": False}))
    try:
        printed = decide_tie("distill_baselines")
    finally:
        record_run_command(RunCommand())
    loop, _, rest = printed.partition("; do ")
    assert loop.startswith("for seed in ") and rest.endswith("; done")
    words = shlex.split(rest.removesuffix("; done").replace("$seed", loop.split()[3]))  # the first seed
    assert words[:2] == ["kedro", "run"]
    options = dict(word.split("=", 1) if word.startswith("--pipelines=") else (word, None) for word in words[2:])
    env, params = words[words.index("--env") + 1], words[words.index("--params") + 1]
    assert env == "compare" and "glue_dir=../shared/glue" in params and "tracking.enabled=false" in params
    monkeypatch.chdir(REPO_ROOT)
    bootstrap_project(REPO_ROOT)
    pipeline = pipelines[options["--pipelines"]]
    loader = settings.CONFIG_LOADER_CLASS(
        conf_source=str(REPO_ROOT / "conf"),
        env=env,
        runtime_params=_split_params(None, None, params),
        **settings.CONFIG_LOADER_ARGS,
    )
    parameters = dict(loader["parameters"])
    assert parameters["task"] == "sst2" and parameters["seed"] == int(loop.split()[3])  # the compare env's, reseeded
    check_run_parameters(parameters, pipeline.inputs())  # raises the run's user error on anything wrong
