"""Two CPU processes through ``torchrun … -m kedro run`` (gloo), as a user launches them.

The tiny teacher has no dropout, so two processes with batch B train exactly like one process
with batch 2B (same data order, DDP averages the gradients): the stored models must agree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, make_wordpiece_tokenizer, migrated_mlflow_db, write_tiny_glue

pytestmark = pytest.mark.slow  # every test here starts kedro on two processes (torchrun): the slow tier

TIMEOUT_S = 600


@pytest.fixture(scope="module")
def dropout_free_teacher(tmp_path_factory) -> Path:
    from bert_kd.core.tiny_models import tiny_bert

    directory = tmp_path_factory.mktemp("teacher_no_dropout")
    tokenizer = make_wordpiece_tokenizer(directory)
    return tiny_bert(directory, tokenizer, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


@pytest.fixture(scope="module")
def glue_dir(tmp_path_factory) -> Path:
    return write_tiny_glue(tmp_path_factory.mktemp("glue"), "RTE", n_train=48, n_dev=24)


def new_project(directory: Path) -> Path:
    directory.mkdir(parents=True)
    shutil.copy(REPO_ROOT / "pyproject.toml", directory / "pyproject.toml")
    shutil.copytree(REPO_ROOT / "conf" / "base", directory / "conf" / "base")
    (directory / "conf" / "local").mkdir()
    (directory / "src").mkdir()
    migrated_mlflow_db(directory / "mlflow.db")
    return directory


def kedro_run(
    project: Path, pipeline: str, params: dict, processes: int, extra_env: dict | None = None, expect_ok: bool = True
) -> subprocess.CompletedProcess:
    """``[torchrun --nproc_per_node N] -m kedro run --pipelines … --params …`` in ``project``."""
    launcher = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}"] if processes > 1 else []
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MLFLOW_TRACKING_URI": f"sqlite:///{project / 'mlflow.db'}",
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
        **(extra_env or {}),
    }
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "GLUE_DIR", "MLFLOW_EXPERIMENT_ID"):
        env.pop(name, None)
    params_arg = ",".join(f"{k}={v}" for k, v in params.items())
    done = subprocess.run(
        [sys.executable, *launcher, "-m", "kedro", "run", f"--pipelines={pipeline}", "--params", params_arg],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    if expect_ok:
        assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return done


def tiny_params(teacher: Path, glue: Path, batch_size: int, **more) -> dict:
    return {
        "task": "rte",
        "glue_dir": glue,
        "teacher.model": teacher,
        "teacher.max_seq_length": 32,
        "training.epochs": 1,
        "training.batch_size": batch_size,
        "training.eval_batch_size": 16,
        "training.learning_rate": 1e-3,
        "training.warmup_ratio": 0.0,
        # conf/base's teacher has its own lr: the teacher's tiny settings are written out
        **{
            f"teacher.training.{k}": v
            for k, v in (
                ("epochs", 1),
                ("batch_size", batch_size),
                ("eval_batch_size", 16),
                ("learning_rate", 1e-3),
                ("warmup_ratio", 0.0),
            )
        },
        "runtime.progress_bar": "false",
        "tracking.log_models": "false",
        **more,
    }


def training_runs(project: Path) -> list:
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{project / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    return [r for r in runs if "mlflow.parentRunId" in r.data.tags]  # children: one per training job


def stored(project: Path, kind: str) -> list[Path]:
    return sorted(p for p in (project / "data" / "06_models" / "store" / kind).iterdir())


def weights(entry: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(entry / "model.safetensors")


def largest_difference(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


def assert_weights_close(a: dict, b: dict, atol: float) -> None:
    worst = largest_difference(a, b)
    assert worst <= atol, f"largest weight difference {worst}"


@pytest.fixture(scope="module")
def two_process_alp(tmp_path_factory, dropout_free_teacher, glue_dir) -> Path:
    project = new_project(tmp_path_factory.mktemp("two") / "project")
    kedro_run(project, "distill_alp", tiny_params(dropout_free_teacher, glue_dir, batch_size=8), processes=2)
    return project


def test_two_process_kedro_run_makes_one_run_and_one_store_entry_per_job(two_process_alp):
    runs = training_runs(two_process_alp)
    names = sorted(r.data.tags["mlflow.runName"] for r in runs)
    assert names == ["distill_alp:rte", "train_teacher:rte"]
    for run in runs:
        assert run.info.status == "FINISHED"
        assert run.data.params["num_processes"] == "2"
    for kind in ("teacher", "student"):
        entries = stored(two_process_alp, kind)
        assert len(entries) == 1 and not entries[0].name.startswith(".")
    checkpoints = two_process_alp / "data" / "06_models" / "store" / "checkpoints"
    assert not [p for p in checkpoints.rglob("*") if p.is_file()]  # finished: no checkpoint left behind
    cache = two_process_alp / "data" / "07_model_output" / "teacher_cache" / "teacher_cache"
    assert len([p for p in cache.iterdir() if not p.name.startswith(".")]) == 1


def test_two_processes_train_like_one_with_the_same_global_batch(
    two_process_alp, tmp_path, dropout_free_teacher, glue_dir
):
    one = new_project(tmp_path / "one")
    kedro_run(one, "distill_alp", tiny_params(dropout_free_teacher, glue_dir, batch_size=16), processes=1)
    for kind in ("teacher", "student"):
        (two,), (single,) = stored(two_process_alp, kind), stored(one, kind)
        assert_weights_close(weights(two), weights(single), atol=1e-4)
    (teacher,) = stored(one, "teacher")
    assert largest_difference(weights(teacher), weights(dropout_free_teacher)) > 1e-3  # it trained
    final = {r.data.tags["mlflow.runName"]: r.data.metrics["final/score"] for r in training_runs(one)}
    for run in training_runs(two_process_alp):
        assert run.data.metrics["final/score"] == pytest.approx(final[run.data.tags["mlflow.runName"]], abs=1e-6)


def test_a_killed_two_process_run_resumes_from_its_checkpoint(
    two_process_alp, tmp_path, dropout_free_teacher, glue_dir
):
    project = new_project(tmp_path / "resumed")
    params = tiny_params(
        dropout_free_teacher,
        glue_dir,
        batch_size=8,
        **{"runtime.checkpoint_every_steps": 1, "training.log_every_steps": 1},
    )
    killed = kedro_run(
        project, "train_teacher", params, processes=2, extra_env={"BERT_KD_FAULT": "step:2"}, expect_ok=False
    )
    assert killed.returncode != 0
    assert any((project / "data" / "06_models" / "store" / "checkpoints" / "teacher").rglob("trainer_state.json"))
    kedro_run(project, "train_teacher", params, processes=2)
    (entry,) = stored(project, "teacher")
    provenance = json.loads((entry / "manifest.json").read_text())["provenance"]
    assert provenance["resumed_from_checkpoint"] is True
    (uninterrupted,) = stored(two_process_alp, "teacher")
    assert entry.name == uninterrupted.name  # the same job (checkpoint and logging settings are not part of it)
    assert_weights_close(weights(entry), weights(uninterrupted), atol=1e-5)


TINY_TABLE = """
reproduce:
  tables:
    tiny:
      tasks: [rte]
      seeds: [1]
      baseline: alp
      selection: dev
      student: {num_layers: 2}
      grid: {training.learning_rate: [1.0e-3]}
      methods:
        alp: {recipe: distill_methods.alp, label: ALP}
"""


def test_a_reproduce_trial_runs_on_two_processes(tmp_path, dropout_free_teacher, glue_dir):
    project = new_project(tmp_path / "sweep")
    (project / "conf" / "local" / "parameters_tiny_table.yml").write_text(TINY_TABLE)
    params = tiny_params(dropout_free_teacher, glue_dir, batch_size=8, **{"reproduce.table": "tiny"})
    kedro_run(project, "reproduce", params, processes=2)
    # written once, by rank 0; the fixture's GLUE files are not the release: a variant's folder (bert_kd.sweeps.trial_results.VARIANTS)
    assert not list((project / "results" / "tiny").glob("*.json"))
    (result,) = (project / "results" / "tiny" / "variants").glob("tiny__glue-*/*.json")
    assert json.loads(result.read_text())["result"]["dev_metric"] is not None
    runs = training_runs(project)
    roles = sorted(r.data.tags.get("role") for r in runs)
    assert roles == ["student", "teacher", "trial"]  # one run per job: the trial, its teacher and its student
    assert {r.data.params["num_processes"] for r in runs} == {"2"}
    assert {r.info.status for r in runs} == {"FINISHED"}
    # the fixture's GLUE files are not the release: the run writes a table of its own, not the committed one
    assert len(list((project / "data" / "08_reporting" / "reproduce").glob("tiny__glue-*.md"))) == 1
    assert not (project / "results" / "tiny" / "tables").exists()
