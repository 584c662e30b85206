"""``reproduce`` and ``evaluate`` through a real Kedro session on tiny models."""

from __future__ import annotations

import json

import mlflow
import pytest

from tests.pipelines.conftest import latest_version, mlflow_runs

TINY_TABLE = {
    "tasks": ["rte"],
    "seeds": [1, 2],
    "baseline": "nkd",
    "selection": "dev",
    "student": {"num_layers": 2},
    "data": {"rte": {"max_train_samples": 40}},
    "grid": {"training.learning_rate": [1.0e-4, 2.0e-4]},
    "methods": {
        "nkd": {"recipe": "distill_methods.nkd", "label": "NKD"},
        "alp": {"recipe": "distill_methods.alp", "label": "ALP"},
    },
}


def tiny_sweep_params(**restrict) -> dict:
    """``--params`` of a tracked run of :data:`TINY_TABLE` at one learning rate (``restrict``: more restrictions)."""
    reproduce = {
        "table": "tiny",
        "tables": {"tiny": TINY_TABLE},
        "grid": "training.learning_rate=1e-4",
        "storage": "sqlite:///data/09_sweeps/optuna.db",
        **restrict,
    }
    return {"reproduce": reproduce, "tracking": {"enabled": True, "log_models": False}}


def test_reproduce_pipeline_tables_parent_run_and_child_runs(run_pipeline, tmp_path):
    """A restricted, resized run (one grid value; all training rows instead of the table's 40)
    writes its own table and cannot change the committed one."""
    committed = tmp_path / "results/tiny/tables"
    committed.mkdir(parents=True)
    (committed / "tiny.md").write_text("| Model | RTE |\nthe committed table\n")
    outputs, root, uri = run_pipeline("reproduce", **tiny_sweep_params())  # max_train_samples=None on the command line
    table = (root / "data/08_reporting/reproduce/table.md").read_text()
    assert "| NKD |" in table and "±" in table and "(2)" in table
    assert not list((root / "results/tiny").glob("*.json"))  # a variant (below): its trials are kept apart
    trial_files = sorted((root / "results/tiny/variants").glob("tiny__glue-*__max_train_samples-all__params-*/*.json"))
    assert len(trial_files) == 4  # 2 methods × 2 seeds at the one restricted grid point (the 2×2×2 sweep: tests/sweep)
    assert json.loads(trial_files[0].read_text())["spec"]["data"]["max_train_samples"] is None  # --params wins
    assert (committed / "tiny.md").read_text() == "| Model | RTE |\nthe committed table\n"
    assert sorted(p.name for p in committed.iterdir()) == ["tiny.md"]
    # named after its restriction, its data (the fixture's GLUE files, not the release, and all training rows)
    # and its settings: the fixture's tiny teacher and student come from --params and change every trial's key
    (own,) = (root / "data/08_reporting/reproduce").glob(
        "tiny__grid-training.learning_rate=1e-4__glue-*__max_train_samples-all__params-*.md"
    )
    assert own.read_text() == table and own.with_name(own.name.replace(".md", ".png")).exists()
    runs = mlflow_runs(uri)
    parent = runs[runs["tags.mlflow.parentRunId"].isna()].iloc[0]
    note = parent["tags.mlflow.note.content"]
    assert (
        note.startswith(("| Model |", "**No best student** on RTE")) and "\n| Model |" in "\n" + note
    )  # tiny students may tie
    assert "metrics.compare/alp/rte" in runs.columns and "metrics.compare/nkd/Average" in runs.columns
    trials = runs[runs["tags.role"] == "trial"]
    assert len(trials) == 4 and set(trials["tags.mlflow.parentRunId"]) == {parent["run_id"]}
    logged = [c for c in runs.columns if c.startswith("params.") and parent[c] is not None and parent[c] == parent[c]]
    assert logged and all(c.startswith("params.reproduce.") for c in logged), logged  # kedro-mlflow: params:reproduce


def test_a_trial_that_fails_fails_the_run_after_its_partial_table_is_reported(run_pipeline, monkeypatch):
    """NKD's trials raise: ALP's still train, the partial table reaches the parent run's description,
    and the ``kedro run`` ends with the sweep's error (a dash in a table of a run that exited 0 hid it)."""
    from bert_kd.sweeps.scheduler import SweepTrialsFailedError
    from bert_kd.sweeps.trial import TrialRunner

    trained = TrialRunner.__call__

    def nkd_fails(self, spec):
        if spec.recipe.get("method") == "nkd":
            raise RuntimeError("NKD broke")
        return trained(self, spec)

    monkeypatch.setattr(TrialRunner, "__call__", nkd_fails)
    params = tiny_sweep_params(seeds="1")
    with pytest.raises(SweepTrialsFailedError, match=r"1 of 2 trials failed in this worker: .*RuntimeError: NKD broke"):
        run_pipeline("reproduce", **params)
    runs = mlflow_runs(mlflow.get_tracking_uri())
    parent = runs[runs["tags.mlflow.parentRunId"].isna()].iloc[0]
    assert parent["status"] == "FAILED" and "| NKD | –" in parent["tags.mlflow.note.content"]
    assert len(runs[runs["tags.role"] == "trial"]) == 1  # ALP's trial trained and was tracked


def test_evaluate_pipeline_on_a_model_directory(run_pipeline, tiny_teacher_dir):
    outputs, root, uri = run_pipeline("evaluate", evaluate={"model": str(tiny_teacher_dir), "max_seq_length": 32})
    evaluation = json.loads(latest_version(root / "data/08_reporting/evaluation.json").read_text())
    assert evaluation["task"] == "rte" and 0.0 <= evaluation["score"] <= 1.0
    assert evaluation["metrics"]["validation"]["accuracy"] == evaluation["score"]
    runs = mlflow_runs(uri)
    assert runs["metrics.final/validation/accuracy"].iloc[0] == pytest.approx(evaluation["score"], rel=5e-4)  # 4 digits


def test_evaluate_refuses_a_missing_model(run_pipeline, tmp_path):
    import pytest

    with pytest.raises(Exception, match="evaluate.model"):
        run_pipeline("evaluate", evaluate={"model": str(tmp_path / "nowhere")})
    while mlflow.active_run() is not None:
        mlflow.end_run()


def test_evaluate_pipeline_on_an_mlflow_model_uri(run_pipeline, tiny_teacher_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_ID", raising=False)  # left by an earlier Kedro session (kedro-mlflow)
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = client.create_run(client.create_experiment("models", artifact_location=(tmp_path / "artifacts").as_uri()))
    client.log_artifacts(run.info.run_id, str(tiny_teacher_dir), "model")
    client.set_terminated(run.info.run_id)
    source = f"runs:/{run.info.run_id}/model"
    outputs, root, _ = run_pipeline("evaluate", evaluate={"model": source, "max_seq_length": 32})
    evaluation = json.loads(latest_version(root / "data/08_reporting/evaluation.json").read_text())
    assert evaluation["model"] == source and evaluation["task"] == "rte"


def test_conf_parameters_are_the_loaders_without_the_command_line():
    """What ``ReproduceRunHook`` hands the node as ``conf_params``: the same conf, no --params, and the
    run's own loader untouched."""
    from bert_kd import settings
    from bert_kd.kedro_project.config_loader import ProjectConfigLoader
    from bert_kd.kedro_project.reproduce_run import conf_parameters
    from tests.conftest import REPO_ROOT

    loader = ProjectConfigLoader(
        str(REPO_ROOT / "conf"),
        runtime_params={"student": {"training": {"warmup_ratio": 0.3}}},
        **{**settings.CONFIG_LOADER_ARGS, "default_run_env": "base"},
    )
    plain = conf_parameters(loader)
    assert plain["student"]["training"]["warmup_ratio"] == plain["training"]["warmup_ratio"] != 0.3
    assert loader["parameters"]["student"]["training"]["warmup_ratio"] == 0.3
    assert conf_parameters(None) is None
