"""Bad-input corpus: every known user error gives one block through ``kedro run``.

Each case runs the project's ``run`` command (bert_kd.cli) in a real Kedro session on a scratch
project with tiny inputs, in-process through click's CliRunner; a handful also run as real
``python -m kedro run`` subprocesses. Asserted: exit status 2, the block names the parameter or
file:line, no traceback, no node ran for parameter errors, nothing under data/06_models.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest
import yaml

from tests.conftest import REPO_ROOT, make_damaged_sqlite, write_tiny_glue

TINY = {"epochs": 1, "batch_size": 8, "eval_batch_size": 16}


@dataclass
class Case:
    name: str
    params: str = ""
    expect: tuple[str, ...] = ()  # substrings of stderr (parameter name, file:line …)
    pipeline: str = "distill_alp"
    spoil: Callable[[Path], None] | None = None  # changes the case's GLUE folder
    node_may_run: bool = False  # data-file errors surface in the first node
    prepare: Callable[[Path], dict] | None = None  # writes files under the case's tmp folder; returns env vars
    args: tuple[str, ...] = ()  # more `kedro run` arguments (--env …)
    conf: dict[str, str] = field(default_factory=dict)  # files written under the project's conf/ for the case
    trains: bool = False  # a job started (its empty lock file stays, as after every job; nothing else may)


def _rte(glue: Path, split: str = "train") -> Path:
    return glue / "RTE" / f"{split}.tsv"


def _replace_line(path: Path, line: int, text: bytes) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[line - 1] = text
    path.write_bytes(b"\n".join(lines))


def _rte_test(glue: Path, rows: list[str], header: str = "index\tsentence1\tsentence2") -> None:
    (glue / "RTE" / "test.tsv").write_text("\n".join([header, *rows]) + "\n")


def _mnli_tests_without_diagnostic(glue: Path) -> None:
    (glue / "MNLI").mkdir()
    for name in ("test_matched.tsv", "test_mismatched.tsv"):
        (glue / "MNLI" / name).write_text("index\tsentence1\tsentence2\n0\tthe dog sat\tyes\n")


def _tracking_down(tmp: Path) -> dict:
    return {"MLFLOW_TRACKING_URI": "http://127.0.0.1:9"}  # the discard port: nothing listens


def _damaged_mlflow_db(tmp: Path) -> dict:
    return {"MLFLOW_TRACKING_URI": f"sqlite:///{make_damaged_sqlite(tmp / 'mlflow.db')}"}


def _damaged_optuna_db(tmp: Path) -> dict:
    make_damaged_sqlite(tmp / "optuna.db")
    return {}


def _copied_store_entry(tmp: Path) -> dict:
    """A tiny teacher stored under one key, copied into another key's folder of a store."""
    from bert_kd.core.files import write_atomically
    from bert_kd.experiment.jobs import Job
    from tests.conftest import make_tiny_bert

    model = make_tiny_bert(tmp / "model", num_layers=1)
    seed_7, seed_42 = Job("teacher", {"seed": 7}, tmp / "store"), Job("teacher", {"seed": 42}, tmp / "store")
    write_atomically(
        seed_7.store_dir,
        lambda d: shutil.copytree(model, d, dirs_exist_ok=True),
        {"kind": "teacher", "key": seed_7.key, "schema_version": 2, "spec": {"seed": 7}},
    )
    shutil.copytree(seed_7.store_dir, seed_42.store_dir)
    (tmp / "entry").symlink_to(seed_42.store_dir)
    return {}


def _store_entry_with(extra: Callable[[Path], None]) -> Callable[[Path], dict]:
    """A tiny teacher stored under its own key, then ``extra`` adds something the manifest does not list."""

    def prepare(tmp: Path) -> dict:
        from bert_kd.core.files import write_atomically
        from bert_kd.experiment.jobs import Job
        from tests.conftest import make_tiny_bert

        model = make_tiny_bert(tmp / "model", num_layers=1)
        job = Job("teacher", {"seed": 7}, tmp / "store")
        write_atomically(
            job.store_dir,
            lambda d: shutil.copytree(model, d, dirs_exist_ok=True),
            {"kind": "teacher", "key": job.key, "schema_version": 2, "spec": {"seed": 7}},
        )
        extra(job.store_dir)
        (tmp / "entry").symlink_to(job.store_dir)
        return {}

    return prepare


def _model_recording(
    task: str, spoil: Callable[[Path], None] | None = None, num_labels: int = 2
) -> Callable[[Path], dict]:
    """A tiny model saved by bert-kd for ``task`` at ``<tmp>/model`` (``spoil`` changes it)."""

    def prepare(tmp: Path) -> dict:
        from bert_kd.core.models import ModelBundle, load_bundle, save_bundle
        from tests.conftest import make_tiny_bert

        bundle = load_bundle(make_tiny_bert(tmp / "plain", num_layers=1, num_labels=num_labels))
        path = save_bundle(
            ModelBundle(bundle.model, bundle.tokenizer, {"role": "teacher", "task": task}), tmp / "model"
        )
        if spoil:
            spoil(path)
        return {}

    return prepare


CASES = [
    # ---- the table
    Case("not_an_int", "max_train_samples=abc", ("max_train_samples", "'abc'")),
    Case("float_seed", "seed=1.5", ("seed", "1.5")),
    Case("negative_checkpoint", "runtime.checkpoint_every_steps=-1", ("runtime.checkpoint_every_steps", "-1")),
    Case("negative_samples", "max_train_samples=-5", ("max_train_samples", "-5")),
    Case("misspelt_key", "max_train_sample=10", ("max_train_sample", "did you mean 'max_train_samples'")),
    Case("unknown_block", "foo.bar=1", ("foo", "unknown key")),
    Case("student_too_deep", "student.num_layers=99", ("student.num_layers", "exceeds the teacher's 4 layers")),
    Case("glue_dir_is_a_file", "glue_dir=pyproject.toml", ("glue_dir", "is a file")),
    Case("offline_hub_teacher", "teacher.model=nosuch-org/x", ("teacher.model", "offline")),
    # ---- more parameters
    Case("missing_teacher_dir", "teacher.model=./no/such/dir", ("teacher.model", "does not exist")),
    Case("missing_student_model", "student.model=./no/such/student", ("student.model", "does not exist")),
    Case("unknown_task", "task=sst3", ("task", "valid names")),
    Case("zero_eval_samples", "max_eval_samples=0", ("max_eval_samples", "greater than or equal to 1")),
    Case("negative_seed", "seed=-1", ("seed",)),
    Case("bad_precision", "runtime.mixed_precision=fp8", ("runtime.mixed_precision", "'fp8'")),
    Case("bad_bool", "tracking.enabled=maybe", ("tracking.enabled", "'maybe'")),
    Case("negative_lr", "student.training.learning_rate=-1", ("student.training.learning_rate",)),
    Case("zero_batch", "teacher.training.batch_size=0", ("teacher.training.batch_size",)),
    Case("warmup_over_one", "student.training.warmup_ratio=1.5", ("student.training.warmup_ratio",)),
    Case("misspelt_training_key", "student.training.epochz=3", ("student.training.epochs",)),
    Case("zero_temperature", "distill_methods.alp.temperature=0", ("distill_methods.alp.temperature",)),
    Case("alp_weights_over_one", "distill_methods.alp.weights.kd=0.9", ("distill_methods.alp", "β = 1 − η − λ")),
    Case("unknown_loss_term", "distill_methods.alp.weights.foo=1", ("distill_methods.alp", "foo")),
    Case("unknown_method", "distill_methods.alp.method=alpp", ("distill_methods.alp", "'alpp'")),
    Case(
        "unknown_mapping",
        "distill_methods.pkd.mapping=nosuch",
        ("distill_methods.pkd.mapping", "nosuch"),
        pipeline="distill_pkd",
    ),
    Case("bad_layer_selection", "student.layer_selection=middle", ("student.layer_selection",)),
    Case("short_sequences", "teacher.max_seq_length=2", ("teacher.max_seq_length",)),
    Case("zero_cache_batch", "teacher_cache.batch_size=0", ("teacher_cache.batch_size",)),
    Case("beta_over_one", "multi_teacher_configs.okd.beta=1.5", ("multi_teacher_configs.okd.beta",)),
    Case(
        "negative_policy_rate",
        "multi_teacher_configs.rl_kd.policy_learning_rate=-0.001",
        ("multi_teacher_configs.rl_kd.policy_learning_rate",),
    ),
    Case(
        "unknown_state_feature",
        "multi_teacher_configs.rl_kd.state_features=[teacher_mood]",
        ("multi_teacher_configs.rl_kd.state_features", "teacher_mood"),
    ),
    Case("bad_filter_arch", "ted.filters.arch=conv", ("ted.filters.arch", "'conv'")),
    Case("negative_ted_weight", "ted_methods.ted.weights.ted=-1", ("ted_methods.ted.weights.ted",)),
    Case("teacher_index", "multi_student.init_from_teacher=5", ("multi_student.init_from_teacher=5",)),
    Case("seed_too_big", "seed=99999999999999999999999", ("seed", "4294967295")),
    Case(
        "seq_longer_than_positions",
        "teacher.max_seq_length=1024",
        ("teacher.max_seq_length", "exceeds the 128 positions", "use at most 128"),
    ),
    # ---- environment: tracking server, damaged databases (checked before anything runs)
    Case(
        "tracking_down",
        "tracking.enabled=true",
        ("http://127.0.0.1:9", "tracking.enabled=false"),
        prepare=_tracking_down,
    ),
    Case(
        "damaged_mlflow_db",
        "tracking.enabled=true",
        ("mlflow.db", "malformed", "mv ", "tracking.enabled=false"),
        prepare=_damaged_mlflow_db,
    ),
    Case(
        "damaged_optuna_db",
        "reproduce.storage=sqlite:///{tmp}/optuna.db,reproduce.table=cpu_protocol",
        ("optuna.db", "malformed", "mv "),
        pipeline="reproduce",
        prepare=_damaged_optuna_db,
    ),
    # ---- training that diverges: stopped, nothing stored
    Case(
        "diverging_teacher",
        "teacher.training.learning_rate=1000",
        ("training diverged", "teacher.training.learning_rate=1000", "rose from"),
        pipeline="train_teacher",
        node_may_run=True,
        trains=True,
    ),
    Case(
        "nan_loss_teacher",
        "teacher.training.learning_rate=1e30",
        ("training diverged", "teacher.training.learning_rate=1e+30", "became nan"),
        pipeline="train_teacher",
        node_may_run=True,
        trains=True,
    ),
    # ---- settings that would not mean what they say
    Case("fp16_on_cpu", "runtime.mixed_precision=fp16", ("runtime.mixed_precision", "fp16 needs a CUDA GPU")),
    Case(
        "teacher_fp16_on_cpu",
        "runtime.teacher_mixed_precision=fp16",
        ("runtime.teacher_mixed_precision", "fp16 needs a CUDA GPU"),
    ),
    Case(
        "compile_cuda_graphs_on_cpu",
        "runtime.compile=reduce-overhead",
        ("runtime.compile", "replays CUDA graphs and needs a CUDA GPU", "use true (inductor)"),
    ),
    Case("compile_blank", "runtime.compile=", ("runtime.compile is blank", "use true (inductor), false, auto")),
    Case(
        "compile_unknown_backend",
        "runtime.compile=nosuch",
        ("runtime.compile", "unknown torch.compile backend or mode 'nosuch'", "reduce-overhead", "inductor"),
    ),
    Case(
        "env_outside_conf",
        args=("--env", "../../somewhere"),
        expect=("--env ../../somewhere", "is a path", "base, local"),
    ),
    Case("env_misspelt", args=("--env", "papr"), expect=("--env papr", "no folder", "base, local")),
    Case(
        "env_missing_interpolation_key",
        args=("--env", "broken"),
        conf={"broken/parameters.yml": "student:\n  training: '${merge:${trainin},{epochs: 1}}'\n"},
        expect=("trainin", "broken/parameters.yml:2"),
    ),
    Case(
        "mlflow_file_store",
        "tracking.enabled=true",
        ("file:./mlruns", "sqlite:///mlflow.db", "MLFLOW_TRACKING_URI"),
        prepare=lambda tmp: {"MLFLOW_TRACKING_URI": "file:./mlruns"},
    ),
    Case(
        "registered_model_name",
        "tracking.registered_model=../../x y/z:1",
        ("tracking.registered_model", "cannot contain '/' or ':'"),
    ),
    Case(
        "tracking_database_under_a_file",
        "tracking.enabled=true",
        ("MLFLOW_TRACKING_URI", "cannot be created", "notes.txt is a file"),
        prepare=lambda tmp: (
            (tmp / "notes.txt").write_text("a file"),
            {"MLFLOW_TRACKING_URI": f"sqlite:///{tmp}/notes.txt/runs/mlflow.db"},
        )[1],
    ),
    Case("unknown_pipeline", pipeline="distill_alpp", expect=("'distill_alpp'", "--pipelines", "did you mean")),
    Case(
        "env_invalid_yaml",
        args=("--env", "broken"),
        conf={"broken/parameters.yml": "student:\n  num_layers: 2\n  training: [1, 2\n"},
        expect=("broken/parameters.yml", "is not valid YAML", "broken/parameters.yml:4:"),
    ),
    Case(
        "env_interpolation_of_base",
        args=("--env", "broken"),
        conf={"broken/parameters.yml": "student:\n  training: '${merge:${training},{epochs: 1}}'\n"},
        expect=(
            "interpolations do not cross environments",
            "broken/parameters.yml:2",
            "training is defined in conf/base",
        ),
    ),
    # ---- lists through --params (Kedro splits it on commas)
    Case(
        "list_through_params",
        "student.layer_selection=[1,9]",
        ("student.layer_selection", "--params 'student.layer_selection=1 9'"),
    ),
    Case(
        "seeds_through_params",
        "reproduce.table=cpu_protocol,reproduce.seeds=1,2",
        ("reproduce.seeds", "--params 'reproduce.seeds=1 2'"),
        pipeline="reproduce",
    ),
    # ---- the sweep's table and restrictions (checked before anything runs)
    Case(
        "unknown_table",
        "reproduce.table=nope",
        ("reproduce.table", "unknown table 'nope'", "cpu_protocol"),
        pipeline="reproduce",
    ),
    Case("no_table", "reproduce.table=", ("reproduce.table", "no table named"), pipeline="reproduce"),
    Case(
        "unknown_sweep_method",
        "reproduce.table=cpu_protocol,reproduce.methods=nosuch",
        ("reproduce.methods", "unknown 'nosuch'"),
        pipeline="reproduce",
    ),
    Case(
        "unknown_sweep_task",
        "reproduce.table=cpu_protocol,reproduce.tasks=cola",
        ("reproduce.tasks", "unknown 'cola'"),
        pipeline="reproduce",
    ),
    Case(
        "unknown_sweep_seed",
        "reproduce.table=cpu_protocol,reproduce.seeds=99",
        ("reproduce.seeds", "unknown 99"),
        pipeline="reproduce",
    ),
    Case(
        "unknown_sweep_grid",
        "reproduce.table=cpu_protocol,reproduce.grid=training.learning_rate=7e-5",
        ("reproduce.grid", "7e-05"),
        pipeline="reproduce",
    ),
    Case(
        "results_dir_is_a_file",
        "reproduce.table=cpu_protocol,reproduce.results_dir=pyproject.toml",
        ("reproduce.results_dir", "pyproject.toml is a file, not a folder"),
        pipeline="reproduce",
    ),
    # ---- evaluate.model
    Case(
        "evaluate_missing_model",
        "evaluate.model=./no/such/model",
        ("evaluate.model", "does not exist"),
        pipeline="evaluate",
        node_may_run=True,
    ),
    Case(
        "evaluate_not_a_model",
        "evaluate.model={tmp}/glue",
        ("evaluate.model", "no config.json"),
        pipeline="evaluate",
        node_may_run=True,
    ),
    Case(
        "evaluate_bad_run_id",
        "evaluate.model=runs:/badid/model",
        ("evaluate.model", "runs:/badid/model"),
        pipeline="evaluate",
        node_may_run=True,
    ),
    Case(
        "evaluate_copied_store_entry",
        "evaluate.model={tmp}/entry",
        ("evaluate.model", "damaged", "a copied entry"),
        pipeline="evaluate",
        node_may_run=True,
        prepare=_copied_store_entry,
    ),
    Case(
        "evaluate_entry_with_stray_file",
        "evaluate.model={tmp}/entry",
        ("evaluate.model", "notes.txt is not listed in manifest.json"),
        pipeline="evaluate",
        node_may_run=True,
        prepare=_store_entry_with(lambda d: (d / "notes.txt").write_text("stray")),
    ),
    Case(
        "evaluate_entry_with_a_link",
        "evaluate.model={tmp}/entry",
        ("evaluate.model", "hostname is a symbolic link"),
        pipeline="evaluate",
        node_may_run=True,
        prepare=_store_entry_with(lambda d: (d / "hostname").symlink_to("/etc/hostname")),
    ),
    Case(
        "evaluate_model_for_another_task",
        "evaluate.model={tmp}/model",
        ("evaluate.model, task", "trained for mrpc", "task=rte", "evaluate.allow_task_mismatch=true"),
        pipeline="evaluate",
        node_may_run=True,
        prepare=_model_recording("mrpc"),
    ),
    Case(
        "predict_glue_model_for_another_task",
        "predict_glue.model={tmp}/model",
        ("predict_glue.model, task", "trained for mrpc", "predict_glue.allow_task_mismatch=true"),
        pipeline="predict_glue",
        node_may_run=True,
        prepare=_model_recording("mrpc"),
    ),
    Case(
        "evaluate_seq_longer_than_positions",
        "evaluate.model={tmp}/model,evaluate.max_seq_length=4096",
        ("evaluate.max_seq_length", "exceeds the 128 positions"),
        pipeline="evaluate",
        prepare=_model_recording("rte"),
    ),
    Case(
        "predict_glue_seq_longer_than_positions",
        "predict_glue.model={tmp}/model,predict_glue.max_seq_length=1024",
        ("predict_glue.max_seq_length", "exceeds the 128 positions"),
        pipeline="predict_glue",
        prepare=_model_recording("rte"),
    ),
    Case(
        "evaluate_pickled_weights_only",
        "evaluate.model={tmp}/model",
        ("evaluate.model", "no safetensors weights"),
        pipeline="evaluate",
        node_may_run=True,
        prepare=_model_recording(
            "rte",
            lambda d: (
                (d / "manifest.json").unlink(),  # a plain folder, not a store entry
                (d / "model.safetensors").rename(d / "pytorch_model.bin"),
            ),
        ),
    ),
    Case(
        "evaluate_custom_code",
        "evaluate.model={tmp}/model",
        ("evaluate.model", "custom code (auto_map"),
        pipeline="evaluate",
        node_may_run=True,
        prepare=_model_recording(
            "rte",
            lambda d: (
                (d / "manifest.json").unlink(),
                (d / "config.json").write_text(
                    (d / "config.json").read_text().replace("{", '{"auto_map": {"AutoModel": "evil.Model"}, ', 1)
                ),
            ),
        ),
    ),
    # ---- predict_glue: the output folder, the test files (checked before anything is written)
    Case(
        "predict_glue_output_dir_is_a_file",
        "predict_glue.model={tmp}/model,predict_glue.output_dir=pyproject.toml",
        ("predict_glue.output_dir", "pyproject.toml is a file"),
        pipeline="predict_glue",
        node_may_run=True,
        prepare=_model_recording("rte"),
    ),
    Case(
        "predict_glue_output_dir_cannot_be_created",
        "predict_glue.model={tmp}/model,predict_glue.output_dir=/proc/bert_kd_submission/rte",
        ("predict_glue.output_dir", "/proc/bert_kd_submission/rte cannot be created"),
        pipeline="predict_glue",
        node_may_run=True,
        prepare=_model_recording("rte"),
    ),
    Case(
        "predict_glue_ax_file_is_a_directory",
        "predict_glue.model={tmp}/model,task=mnli,predict_glue.ax_file={tmp}/glue",
        ("predict_glue.ax_file", "glue is a directory, not a file"),
        pipeline="predict_glue",
        node_may_run=True,
        prepare=_model_recording("mnli", num_labels=3),
        spoil=_mnli_tests_without_diagnostic,
    ),
    Case(
        "predict_glue_mnli_without_diagnostic",
        "predict_glue.model={tmp}/model,task=mnli",
        ("diagnostic/diagnostic.tsv", "predict_glue.ax_file", "fix:"),
        pipeline="predict_glue",
        node_may_run=True,
        prepare=_model_recording("mnli", num_labels=3),
        spoil=_mnli_tests_without_diagnostic,
    ),
    Case(
        "predict_glue_dev_file_as_test",
        "predict_glue.model={tmp}/model",
        ("RTE/test.tsv:1:label", "a dev or train file"),
        pipeline="predict_glue",
        node_may_run=True,
        prepare=_model_recording("rte"),
        spoil=lambda g: shutil.copy(_rte(g, "dev"), _rte(g, "test")),
    ),
    Case(
        "predict_glue_repeated_index",
        "predict_glue.model={tmp}/model",
        ("RTE/test.tsv:4:index", "index '0' repeats line 2"),
        pipeline="predict_glue",
        node_may_run=True,
        prepare=_model_recording("rte"),
        spoil=lambda g: _rte_test(g, ["0\ta\tb", "1\tc\td", "0\te\tf"]),
    ),
    Case(
        "predict_glue_empty_index",
        "predict_glue.model={tmp}/model",
        ("RTE/test.tsv:3:index", "empty index"),
        pipeline="predict_glue",
        node_may_run=True,
        prepare=_model_recording("rte"),
        spoil=lambda g: _rte_test(g, ["0\ta\tb", "\tc\td"]),
    ),
    # ---- data files (glue.py)
    Case(
        "non_utf8",
        pipeline="data_processing",
        expect=("RTE/train.tsv:3:", "cp1252", "iconv"),
        spoil=lambda g: _replace_line(_rte(g), 3, b"0\tcaf\xe9 au lait\tyes\tentailment"),
        node_may_run=True,
    ),
    Case(
        "binary_file",
        pipeline="data_processing",
        expect=("RTE/train.tsv:1", "binary"),
        spoil=lambda g: _rte(g).write_bytes(b"\x00\x01\x02" * 100),
        node_may_run=True,
    ),
    Case(
        "gzip_file",
        pipeline="data_processing",
        expect=("RTE/train.tsv:1", "gzip"),
        spoil=lambda g: _rte(g).write_bytes(gzip.compress(_rte(g).read_bytes())),
        node_may_run=True,
    ),
    Case(
        "huge_field",
        pipeline="data_processing",
        expect=("RTE/train.tsv:4", "field limit"),
        spoil=lambda g: _replace_line(_rte(g), 4, b"2\t" + b"x" * 200_000 + b"\tyes\tentailment"),
        node_may_run=True,
    ),
    Case(
        "wrong_field_count",
        pipeline="data_processing",
        expect=("RTE/train.tsv:5", "tab-separated fields"),
        spoil=lambda g: _replace_line(_rte(g), 5, b"3\tonly two"),
        node_may_run=True,
    ),
    Case(
        "unknown_label",
        pipeline="data_processing",
        expect=("RTE/dev.tsv:2:label", "unknown label"),
        spoil=lambda g: _replace_line(_rte(g, "dev"), 2, b"0\ta\tb\tmaybe"),
        node_may_run=True,
    ),
    Case(
        "missing_column",
        pipeline="data_processing",
        expect=("RTE/train.tsv:1", "sentence2"),
        spoil=lambda g: _replace_line(_rte(g), 1, b"index\tsentence1\tsentenceX\tlabel"),
        node_may_run=True,
    ),
    Case(
        "empty_file",
        pipeline="data_processing",
        expect=("RTE/train.tsv", "empty"),
        spoil=lambda g: _rte(g).write_bytes(b""),
        node_may_run=True,
    ),
    Case(
        "missing_dev",
        pipeline="data_processing",
        expect=("RTE/dev.tsv", "missing"),
        spoil=lambda g: _rte(g, "dev").unlink(),
        node_may_run=True,
    ),
    Case(
        "train_is_a_directory",
        pipeline="data_processing",
        expect=("RTE/train.tsv", "directory"),
        spoil=lambda g: (_rte(g).unlink(), _rte(g).mkdir()),
        node_may_run=True,
    ),
]


@pytest.fixture(scope="module")
def project(tmp_path_factory, tiny_teacher_dir):
    """A scratch copy of the project (conf/base + a tiny conf/local) with one MLflow database."""
    from kedro.framework.startup import bootstrap_project

    root = tmp_path_factory.mktemp("project")
    shutil.copy(REPO_ROOT / "pyproject.toml", root / "pyproject.toml")
    shutil.copytree(REPO_ROOT / "conf" / "base", root / "conf" / "base")
    (root / "conf" / "local").mkdir()
    (root / "src").mkdir()
    local = {
        "task": "rte",
        "max_train_samples": None,
        "teacher": {"model": str(tiny_teacher_dir), "max_seq_length": 32, "training": TINY},
        "student": {"num_layers": 2, "training": TINY},
        "runtime": {"progress_bar": False, "checkpoint_every_steps": 0},
        "tracking": {"enabled": False},
    }
    (root / "conf" / "local" / "parameters.yml").write_text(yaml.safe_dump(local))
    bootstrap_project(root)
    return root


def _files_under(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file()] if path.exists() else []


def run_case(case: Case, project: Path, tmp_path: Path, monkeypatch, runner_args=None):
    from click.testing import CliRunner

    from bert_kd.cli import cli

    glue = tmp_path / "glue"
    write_tiny_glue(glue, "RTE")
    if case.spoil:
        case.spoil(glue)
    monkeypatch.chdir(project)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{project / 'mlflow.db'}")  # created once
    monkeypatch.setenv("BERT_KD_ERROR_LOG", str(tmp_path / "errors.log"))
    monkeypatch.delenv("GLUE_DIR", raising=False)
    monkeypatch.delenv("BERT_KD_DEBUG", raising=False)
    for name, value in (case.prepare(tmp_path) if case.prepare else {}).items():
        monkeypatch.setenv(name, value)
    shutil.rmtree(project / "data", ignore_errors=True)
    params = ",".join(p for p in (f"glue_dir={glue}", case.params.format(tmp=tmp_path)) if p)
    args = ["run", f"--pipelines={case.pipeline}", *case.args, "--params", params]
    written = []
    for name, text in case.conf.items():
        path = project / "conf" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path.parent)
    try:
        result = CliRunner().invoke(cli, args)
    finally:
        for folder in written:
            shutil.rmtree(folder, ignore_errors=True)
    return result


def is_parameter_check(case: Case) -> bool:
    """A case that only sets ``--params`` (Kedro parses them whole): the run's parameter check refuses it
    before any node, wherever the run starts from."""
    from bert_kd.cli import comma_split_list

    plain = not (case.prepare or case.spoil or case.conf or case.args or case.node_may_run or case.trains)
    return plain and bool(case.params) and comma_split_list(case.params) is None


#: Parameter checks that also run through ``kedro run`` (exit status, one block, no traceback, nothing
#: written): one for each check of :func:`bert_kd.kedro_project.hooks.check_run_parameters` and of
#: the model and data folders it reads.
THROUGH_THE_CLI = (
    "not_an_int",
    "misspelt_key",
    "student_too_deep",
    "glue_dir_is_a_file",
    "offline_hub_teacher",
    "missing_teacher_dir",
    "fp16_on_cpu",
    "seq_longer_than_positions",
    "unknown_table",
    "registered_model_name",
)
PARAMETER_CASES = [c for c in CASES if is_parameter_check(c) and c.name not in THROUGH_THE_CLI]
CLI_CASES = [c for c in CASES if c not in PARAMETER_CASES]


def test_the_cases_are_split_between_the_cli_and_the_parameter_check():
    assert {c.name for c in CLI_CASES} >= set(THROUGH_THE_CLI)
    assert PARAMETER_CASES and len(CLI_CASES) + len(PARAMETER_CASES) == len(CASES)
    assert not [c.name for c in PARAMETER_CASES if c.pipeline not in ("distill_alp", "distill_pkd", "reproduce")]


def run_parameters(project: Path, pipeline: str, params: str) -> dict:
    """The merged parameters a ``kedro run --pipelines=<pipeline> --params <params>`` in ``project``
    hands its hooks: Kedro's ``--params`` parser, the project's config loader (settings), Kedro's
    parameter validator for the pipeline."""
    from kedro.framework.cli.utils import _split_params
    from kedro.framework.project import pipelines, settings
    from kedro.validation.parameter_validator import ParameterValidator

    loader = settings.CONFIG_LOADER_CLASS(
        conf_source=str(project / settings.CONF_SOURCE),
        env=None,
        runtime_params=_split_params(None, None, params),
        **settings.CONFIG_LOADER_ARGS,
    )
    return ParameterValidator({pipeline: pipelines[pipeline]}).validate_raw_params(loader["parameters"])


def with_params(parameters: dict, params: str) -> dict:
    """``parameters`` (resolved) with ``--params`` (one key each) merged in: what the config loader
    gives for them (the test below), without reading and resolving the configuration again."""
    from kedro.framework.cli.utils import _split_params
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.merge(parameters, _split_params(None, None, params)))


@pytest.fixture(scope="module")
def project_parameters(project, tmp_path_factory) -> tuple[dict, Path]:
    """The merged parameters of a run in ``project`` whose only ``--params`` is its GLUE folder; the folder."""
    glue = write_tiny_glue(tmp_path_factory.mktemp("glue"), "RTE")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(project)
        patch.delenv("GLUE_DIR", raising=False)
        return run_parameters(project, "distill_alp", f"glue_dir={glue}"), glue


@pytest.mark.parametrize(
    "pipeline, params",
    [
        ("distill_alp", "student.training.learning_rate=-1,seed=1.5,foo.bar=1"),  # into an interpolated block
        ("distill_pkd", "distill_methods.pkd.mapping=nosuch,max_train_sample=10"),
        ("reproduce", "reproduce.table=cpu_protocol,reproduce.grid=training.learning_rate=7e-5"),
    ],
)
def test_params_merged_into_the_projects_parameters_are_what_a_run_reads(
    pipeline, params, project, project_parameters, monkeypatch
):
    parameters, glue = project_parameters
    monkeypatch.chdir(project)
    merged = with_params(parameters, params)
    assert merged == run_parameters(project, pipeline, f"glue_dir={glue},{params}")
    assert merged != parameters


@pytest.mark.parametrize("case", PARAMETER_CASES, ids=[c.name for c in PARAMETER_CASES])
def test_bad_parameter_is_refused_by_the_runs_parameter_check(case, project, project_parameters, monkeypatch):
    """The check ``kedro run`` makes before any node (the CLI cases below show how its refusal reaches
    the terminal): the block names the parameter, its value and the fix."""
    from kedro.framework.project import pipelines

    from bert_kd.config.errors import UserError
    from bert_kd.kedro_project.hooks import check_run_parameters

    monkeypatch.chdir(project)
    monkeypatch.delenv("GLUE_DIR", raising=False)
    shutil.rmtree(project / "data", ignore_errors=True)
    with pytest.raises(UserError) as refused:
        check_run_parameters(with_params(project_parameters[0], case.params), pipelines[case.pipeline].inputs())
    block = refused.value.block()
    assert block.count("bert-kd: ") == 1, block
    for text in case.expect:
        assert text in block, (text, block)
    assert not (project / "data").exists()


@pytest.mark.parametrize("case", CLI_CASES, ids=[c.name for c in CLI_CASES])
def test_bad_input_gives_one_block(case, project, tmp_path, monkeypatch):
    started = time.monotonic()
    result = run_case(case, project, tmp_path, monkeypatch)
    # a generous bound, not a benchmark: an unreachable tracking server used to retry for 252 s
    assert time.monotonic() - started < 90, "took minutes: retrying instead of failing fast?"
    assert result.exit_code == 2, (result.exit_code, result.stderr, result.exception)
    stderr = result.stderr
    assert stderr.count("bert-kd: ") == 1, stderr  # one block
    for text in case.expect:
        assert text in stderr, (text, stderr)
    assert "Traceback" not in stderr and "Traceback" not in result.stdout
    assert "Traceback" in (tmp_path / "errors.log").read_text()  # the full story is in the log
    models = _files_under(project / "data" / "06_models")
    locks = project / "data" / "06_models" / "store" / "locks"
    assert not [p for p in models if not (case.trains and p.is_relative_to(locks) and p.stat().st_size == 0)], models
    if not case.node_may_run:
        assert not _files_under(project / "data"), "a node ran before the parameters were checked"


def _selection_failure(selection: dict):
    from kedro.pipeline import node, pipeline

    def identity(x):
        return x

    try:
        pipeline([node(identity, "a", "b", name="only", tags=["t"])]).filter(**selection)
    except ValueError as exc:
        return exc
    raise AssertionError("kedro kept a node")


@pytest.mark.parametrize(
    "selection, expect",
    [
        ({"node_names": ["nosuchnode"]}, ("--nodes", "['nosuchnode']")),
        ({"tags": ["nosuchtag"]}, ("--tags", "no nodes after applying")),
    ],
    ids=["unknown_node", "tags_matching_nothing"],
)
def test_a_node_selection_that_keeps_nothing_is_one_block(selection, expect, monkeypatch, tmp_path):
    monkeypatch.setenv("BERT_KD_ERROR_LOG", str(tmp_path / "errors.log"))
    result = _failing_run(monkeypatch, _selection_failure(selection))
    assert result.exit_code == 2 and result.stderr.count("bert-kd: ") == 1, result.output
    assert "Traceback" not in result.output and all(text in result.stderr for text in expect), result.stderr


def test_an_unknown_runner_is_one_block_before_the_run(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from bert_kd import cli as cli_module

    monkeypatch.setenv("BERT_KD_ERROR_LOG", str(tmp_path / "errors.log"))
    monkeypatch.setattr(cli_module.kedro_run, "callback", lambda **_: pytest.fail("the run started"))
    result = CliRunner().invoke(cli_module.cli, ["run", "--runner", "NoSuchRunner"])
    assert result.exit_code == 2 and result.stderr.count("bert-kd: ") == 1, result.output
    assert "--runner 'NoSuchRunner'" in result.stderr and "ThreadRunner" in result.stderr
    assert cli_module.runner_error("ThreadRunner") is None


def test_debug_variable_prints_the_traceback(project, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from bert_kd.cli import cli

    run_case(CASES[0], project, tmp_path, monkeypatch)
    monkeypatch.setenv("BERT_KD_DEBUG", "1")
    result = CliRunner().invoke(cli, ["run", "--pipelines=distill_alp", "--params", "seed=1.5"])
    assert result.exit_code == 2 and "Traceback" in result.stderr and "seed" in result.stderr


def test_unexpected_errors_keep_their_traceback(monkeypatch):
    from click.testing import CliRunner

    from bert_kd import cli as cli_module

    def boom(**_):
        raise RuntimeError("a bug, not a user error")

    monkeypatch.setattr(cli_module.kedro_run, "callback", boom)
    result = CliRunner().invoke(cli_module.cli, ["run"])
    assert result.exit_code == 1 and isinstance(result.exception, RuntimeError)


def _failing_run(monkeypatch, error: BaseException):
    from click.testing import CliRunner

    from bert_kd import cli as cli_module

    def fail(**_):
        raise RuntimeError("a node failed") from error

    monkeypatch.setattr(cli_module.kedro_run, "callback", fail)
    return CliRunner().invoke(cli_module.cli, ["run"])


def test_a_full_disk_mid_run_is_one_block_naming_the_file(monkeypatch, tmp_path):
    import errno

    monkeypatch.setenv("BERT_KD_ERROR_LOG", str(tmp_path / "errors.log"))
    target = tmp_path / "data/08_reporting/teacher_metrics.json"
    result = _failing_run(monkeypatch, OSError(errno.ENOSPC, "No space left on device", str(target)))
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert str(target) in result.stderr and "disk is full" in result.stderr and "free space" in result.stderr


def test_a_full_disk_names_the_disk_of_the_file_not_the_projects():
    """A store on its own mount: the block's fix names that mount (``/proc`` stands in for it here), not the disk of
    the folder the writer was given."""
    import errno

    from bert_kd.config.errors import storage_error

    full = OSError(errno.ENOSPC, "No space left on device", "/proc/no-such-store/entry/model.safetensors")
    error = storage_error(full, Path.cwd())
    assert "disk mounted at /proc," in error.fix and "df -h /proc;" in error.fix, error.fix


def test_a_full_disk_without_a_file_name_names_the_project_folder(monkeypatch, tmp_path):
    import errno

    monkeypatch.setenv("BERT_KD_ERROR_LOG", str(tmp_path / "errors.log"))
    monkeypatch.chdir(tmp_path)
    result = _failing_run(monkeypatch, OSError(errno.ENOSPC, "No space left on device"))
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert f"which holds {tmp_path}" in result.stderr and "a file of this run" not in result.stderr


def test_a_full_disk_without_a_file_name_names_the_full_mount_of_the_store_not_the_projects(monkeypatch, tmp_path):
    """ENOSPC with no path (a write(2) on an open file) while the store, on its own mount, is full: the block names
    the store and its disk (it sent `df -h /` to the root disk)."""
    import errno

    from bert_kd.config import errors

    monkeypatch.setenv("BERT_KD_ERROR_LOG", str(tmp_path / "errors.log"))
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "data/06_models/store"
    store.mkdir(parents=True)
    (tmp_path / "data/01_raw").mkdir()
    monkeypatch.setattr(errors, "nearly_full", lambda path: Path(path) == store.resolve())
    monkeypatch.setattr(
        errors, "mount_point", lambda path: store if store in (Path(path), *Path(path).parents) else Path("/")
    )
    result = _failing_run(monkeypatch, OSError(errno.ENOSPC, "No space left on device"))
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert f"cannot write {store}" in result.stderr and f"df -h {store};" in result.stderr, result.stderr
    assert "df -h /;" not in result.stderr


def test_a_full_disk_during_a_copy_names_the_destination_not_the_source(tmp_path, monkeypatch):
    """shutil's copy names its source first and its destination second: push --dry-run named the store's file
    (the source) as the one it could not write."""
    import errno

    from click.testing import CliRunner

    from bert_kd.cli import cli
    from bert_kd.experiment import hub

    entry, target = _student_entry(tmp_path / "store"), tmp_path / "to-push"

    def fill_up(source, destination):
        raise OSError(errno.ENOSPC, "No space left on device", str(source), None, str(destination))

    monkeypatch.setattr(hub.shutil, "copy2", fill_up)
    monkeypatch.setenv("BERT_KD_ERROR_LOG", str(tmp_path / "errors.log"))
    result = CliRunner().invoke(cli, ["push", str(entry), "someone/alp-rte", "--dry-run", "--to", str(target)])
    assert result.exit_code == 2 and "disk is full" in result.stderr, result.stderr
    assert f"where: {target}/" in result.stderr and f"where: {entry}" not in result.stderr, result.stderr
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    pushed = CliRunner().invoke(cli, ["push", str(entry), "someone/alp-rte"])  # staged in the temporary folder
    assert pushed.exit_code == 2 and "disk is full" in pushed.stderr and "log in" not in pushed.stderr, pushed.stderr


def test_a_postgres_storage_without_its_driver_names_the_extra(project, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # not installed (the postgres extra), whatever this venv has
    case = Case(
        "postgres_without_driver",
        "reproduce.table=cpu_protocol,reproduce.storage=postgresql+psycopg://bert_kd@127.0.0.1:5433/bert_kd_optuna",
        pipeline="reproduce",
    )
    result = run_case(case, project, tmp_path, monkeypatch)
    assert result.exit_code == 2, (result.stderr, result.exception)
    assert result.stderr.count("bert-kd: ") == 1 and "Traceback" not in result.stderr
    assert "reproduce.storage" in result.stderr and 'pip install -e ".[postgres]"' in result.stderr
    assert not _files_under(project / "data" / "06_models")


def test_a_database_damaged_mid_run_is_named(monkeypatch, tmp_path):
    import sqlite3

    monkeypatch.setenv("BERT_KD_ERROR_LOG", str(tmp_path / "errors.log"))
    database = make_damaged_sqlite(tmp_path / "mlflow.db")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{database}")
    result = _failing_run(monkeypatch, sqlite3.DatabaseError("database disk image is malformed"))
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert str(database) in result.stderr and "mv " in result.stderr


def test_user_error_found_in_the_exception_chain():
    from bert_kd.config.errors import ParameterError, find_user_error

    inner = ParameterError([("seed", "bad")])
    try:
        try:
            raise inner
        except ParameterError as exc:
            raise RuntimeError("wrapped by a runner") from exc
    except RuntimeError as outer:
        assert find_user_error(outer) is inner


SUBPROCESS_CASES = [c for c in CASES if c.name in ("not_an_int", "offline_hub_teacher", "non_utf8")]


@pytest.mark.parametrize(
    "case",
    # One real `kedro run` in the default tier; the other two (~20 s each) run in the slow tier.
    [pytest.param(c, id=c.name, marks=() if c.name == "not_an_int" else pytest.mark.slow) for c in SUBPROCESS_CASES],
)
def test_real_kedro_run_subprocess(case, project, tmp_path):
    glue = tmp_path / "glue"
    write_tiny_glue(glue, "RTE")
    if case.spoil:
        case.spoil(glue)
    shutil.rmtree(project / "data", ignore_errors=True)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "src"), str(REPO_ROOT)]),
        "MLFLOW_TRACKING_URI": f"sqlite:///{project / 'mlflow.db'}",
        "HF_HUB_OFFLINE": "1",
        "BERT_KD_ERROR_LOG": str(tmp_path / "errors.log"),
        "KEDRO_DISABLE_TELEMETRY": "1",
    }
    env.pop("BERT_KD_DEBUG", None)
    env.pop("GLUE_DIR", None)
    params = ",".join(p for p in (f"glue_dir={glue}", case.params) if p)
    proc = subprocess.run(
        [sys.executable, "-m", "kedro", "run", f"--pipelines={case.pipeline}", "--params", params],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    assert "bert-kd: " in proc.stderr
    for text in case.expect:
        assert text in proc.stderr
    assert not _files_under(project / "data" / "06_models")


# ---- `bert-kd results` and `bert-kd --help`


def _table_project(tmp_path: Path, table: str = "cpu_protocol_v2") -> Path:
    """A scratch project (a copy of the checkout's conf/base) with an empty results/<table>/."""
    project = tmp_path / "project"
    (project / "results" / table).mkdir(parents=True)
    shutil.copytree(REPO_ROOT / "conf" / "base", project / "conf" / "base")
    return project


def _results(*args: str):
    from click.testing import CliRunner

    from bert_kd.analysis.cli import results

    return CliRunner().invoke(results, list(args))


def _assert_one_block(result, *expect: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert result.stderr.count("bert-kd: ") == 1 and "Traceback" not in result.output, result.output
    for text in expect:
        assert text in result.stderr, (text, result.stderr)


def test_results_on_a_folder_that_is_no_table_writes_nothing(tmp_path):
    project = _table_project(tmp_path)
    _assert_one_block(_results("gradient-shares", str(project / "conf")), "no table named 'conf'", "cpu_protocol_v2")
    assert sorted(p.name for p in (project / "conf").iterdir()) == ["base"]


def test_results_on_an_empty_table_folder_is_one_block(tmp_path):
    folder = _table_project(tmp_path) / "results" / "cpu_protocol_v2"
    for command in ("render", "paper-gap", "power", "gradient-shares"):
        _assert_one_block(_results(command, str(folder)), "holds no trial results", "reproduce.table=cpu_protocol_v2")
    assert not (folder / "tables").exists()


def test_results_name_a_truncated_trial_json(tmp_path):
    folder = _table_project(tmp_path) / "results" / "cpu_protocol_v2"
    committed = sorted((REPO_ROOT / "results" / "cpu_protocol_v2").glob("*.json"))[:3]
    for path in committed:
        shutil.copy(path, folder / path.name)
    broken = folder / committed[1].name
    broken.write_bytes(broken.read_bytes()[:200])
    for command in ("render", "gradient-shares"):
        _assert_one_block(_results(command, str(folder)), f"trial result {broken.name} cannot be read", f"{broken}:")
    assert not (folder / "tables").exists()


def test_bert_kd_help_lists_its_commands(capsys):
    from bert_kd.__main__ import main

    with pytest.raises(SystemExit) as done:
        main(["--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0
    assert "bert-kd results render|paper-gap|power|gradient-shares FOLDER" in out and "--pipelines" in out


# ---------------------------------------------------------------- bert-kd card / push
def _student_entry(root: Path) -> Path:
    from tests.experiment.test_model_card import stored_entry

    return stored_entry(
        root,
        "student",
        {"role": "student", "method": "alp", "task": "rte", "best_metrics": {"accuracy": 0.6}, "dev_examples": 24},
        {"task": "rte", "seed": 42},
    )


def test_card_writes_the_store_entrys_hub_card(tmp_path):
    from click.testing import CliRunner
    from huggingface_hub import ModelCard

    from bert_kd.cli import cli

    entry = _student_entry(tmp_path / "store")
    result = CliRunner().invoke(cli, ["card", str(entry)])
    assert result.exit_code == 0, result.output
    assert f"model card: {entry / 'README.md'}" in result.output
    assert ModelCard.load(entry / "README.md").data.eval_results[0].metric_value == 0.6


def test_push_dry_run_writes_the_folder_transformers_loads_and_a_busy_folder_is_a_user_error(tmp_path):
    from click.testing import CliRunner
    from huggingface_hub import ModelCard
    from transformers import AutoModelForSequenceClassification

    from bert_kd.cli import cli

    entry, target = _student_entry(tmp_path / "store"), tmp_path / "to-push"
    result = CliRunner().invoke(cli, ["push", str(entry), "someone/alp-rte", "--dry-run", "--to", str(target)])
    assert result.exit_code == 0, result.output
    assert AutoModelForSequenceClassification.from_pretrained(target).config.num_labels == 2
    assert ModelCard.load(target / "README.md").data.eval_results
    again = CliRunner().invoke(cli, ["push", str(entry), "someone/alp-rte", "--dry-run", "--to", str(target)])
    assert again.exit_code == 2 and "is not empty" in again.output and "Traceback" not in again.output


def _bilstm_entry(root: Path) -> Path:
    """A store entry of a tiny BiLSTM student (Tang et al.'s, on a tiny BERT teacher's vocabulary)."""
    from types import SimpleNamespace

    from bert_kd.core.bilstm import bilstm_student
    from bert_kd.core.files import write_atomically
    from bert_kd.experiment import jobs
    from tests.conftest import make_tiny_bert

    job = jobs.Job("student", {"task": "rte", "seed": 1, "recipe": {"method": "logits_mse"}}, root)

    def write(directory: Path) -> None:
        from transformers import AutoModelForSequenceClassification

        make_tiny_bert(directory, num_layers=1)  # its tokenizer; the model is replaced by the BiLSTM
        teacher = AutoModelForSequenceClassification.from_pretrained(directory)
        sizes = SimpleNamespace(hidden_size=4, classifier_size=4, dropout=0.0, embeddings="teacher")
        bilstm_student(teacher, sizes, 2, siamese=True).save_pretrained(directory)
        info = {"role": "student", "method": "bilstm", "algorithm": "logits_mse", "task": "rte", "key": job.key}
        (directory / "bert_kd.json").write_text(json.dumps({**info, "best_metrics": {"accuracy": 0.5}}))

    return write_atomically(job.store_dir, write, jobs.identity_manifest(job))


@pytest.mark.parametrize("kind", ["bert", "bilstm"])
def test_a_pushed_folder_loads_as_its_card_says_in_a_process_without_bert_kd(tmp_path, kind):
    """The dry-run folder of ``bert-kd push``, loaded by the card's own snippet in a fresh process where
    ``import bert_kd`` fails: the repository id given to push in it, and for the BiLSTM the Hub's custom code."""
    import ast
    import re

    from click.testing import CliRunner

    from bert_kd.cli import cli

    entry = _student_entry(tmp_path / "store") if kind == "bert" else _bilstm_entry(tmp_path / "store")
    target, repo = tmp_path / "to-push", f"someone/{kind}-rte"
    result = CliRunner().invoke(cli, ["push", str(entry), repo, "--dry-run", "--to", str(target)])
    assert result.exit_code == 0, result.output
    card = (target / "README.md").read_text()
    snippet = re.search(r"## How to use\n\n(?:.*?\n\n)?```python\n(.*?)```", card, re.S).group(1)
    assert f'model="{repo}"' in snippet and "<this repository>" not in card and "README.md)" not in card
    config = json.loads((target / "config.json").read_text())
    if kind == "bilstm":
        assert "trust_remote_code=True" in snippet and "custom_code" in card
        assert config["auto_map"]["AutoModelForSequenceClassification"].startswith("modeling_bert_kd_bilstm.")
        tree = ast.parse((target / "modeling_bert_kd_bilstm.py").read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not {m for m in imported if m.split(".")[0] == "bert_kd"}, imported  # self-contained
    else:
        assert "trust_remote_code" not in snippet and "auto_map" not in config
    script = (
        "import sys\nsys.modules['bert_kd'] = None  # bert-kd is not installed here\n"
        "try:\n    import bert_kd\nexcept ImportError:\n    pass\nelse:\n    raise SystemExit('bert_kd imported')\n"
        + snippet.replace(repo, str(target))  # the hub would serve the repository's files: here, the folder
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", HF_MODULES_CACHE=str(tmp_path / "modules"))
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "'label': 'entailment'" in done.stdout or "'label': 'not_entailment'" in done.stdout, done.stdout


def test_a_full_disk_during_push_is_one_block_and_leaves_no_half_written_folder(tmp_path, monkeypatch):
    import errno

    from click.testing import CliRunner

    from bert_kd.cli import cli
    from bert_kd.experiment import hub

    entry, target = _student_entry(tmp_path / "store"), tmp_path / "to-push"
    copy, copied = hub.shutil.copy2, []

    def fill_up(source, destination):
        if copied:
            raise OSError(errno.ENOSPC, "No space left on device", str(destination))
        copied.append(copy(source, destination))

    monkeypatch.setattr(hub.shutil, "copy2", fill_up)
    monkeypatch.setenv("BERT_KD_ERROR_LOG", str(tmp_path / "errors.log"))
    result = CliRunner().invoke(cli, ["push", str(entry), "someone/alp-rte", "--dry-run", "--to", str(target)])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert "disk is full" in result.stderr and result.stderr.count("bert-kd: ") == 1, result.stderr
    assert copied and not target.exists()


def test_card_and_push_of_a_folder_that_is_no_model_and_an_offline_push_exit_2(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from bert_kd.cli import cli

    result = CliRunner().invoke(cli, ["card", str(tmp_path)])
    assert result.exit_code == 2 and "no config.json" in result.output and "Traceback" not in result.output
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    pushed = CliRunner().invoke(cli, ["push", str(_student_entry(tmp_path / "store")), "someone/alp-rte"])
    assert pushed.exit_code == 2 and "the push of" in pushed.output and "--dry-run" in pushed.output


def test_card_of_an_mlflow_uri_whose_model_is_not_in_this_store_is_written_to_the_reports(tmp_path, monkeypatch):
    import mlflow
    from click.testing import CliRunner
    from huggingface_hub import ModelCard

    from bert_kd.cli import cli
    from bert_kd.tracking.logged_models import log_model_directory

    entry = _student_entry(tmp_path / "elsewhere")
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    mlflow.set_experiment(experiment_id=mlflow.create_experiment("cards", artifact_location=str(tmp_path / "art")))
    with mlflow.start_run() as run:
        log_model_directory(entry, task="rte")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["card", f"runs:/{run.info.run_id}/alp-rte-student"])
    assert result.exit_code == 0, result.output
    written = tmp_path / "data/08_reporting/model_cards" / entry.name / "README.md"
    assert f"model card: {written.relative_to(tmp_path)}" in result.output
    assert ModelCard.load(written).data.eval_results[0].dataset_config == "rte"


@pytest.mark.parametrize(
    ("key", "given", "block", "expected"),
    [
        ("augment.rules", "[mask,pos]", "Augment", ["mask", "pos"]),
        ("student.layer_selection", "[1,3]", "Student", [1, 3]),
        ("general.corpus.files", "[a.txt,b.txt]", "GeneralCorpus", ["a.txt", "b.txt"]),
        ("figures.alignment_pairs", "[[1,12],[2,12]]", "Figures", [[1, 12], [2, 12]]),
        ("export_student.batch_sizes", "[1,32]", "ExportStudent", [1, 32]),
    ],
)
def test_the_printed_fix_for_a_cut_list_works_for_every_list_key(key, given, block, expected):
    """`--params 'augment.rules=[mask,pos]'` is cut by Kedro's comma split; the fix the block prints, given as
    it says, is the list (it failed "Input should be a valid list" for augment.rules)."""
    import re

    from bert_kd.cli import comma_split_list
    from bert_kd.config import schema

    error = comma_split_list(f"{key}={given}")
    fixed = re.search(rf"--params '{re.escape(key)}=([^']*)'", error.fix).group(1)
    field = key.rsplit(".", 1)[1]
    required = {"Student": {"num_layers": 2}}.get(block, {})
    assert getattr(getattr(schema, block).model_validate({**required, field: fixed}), field) == expected
