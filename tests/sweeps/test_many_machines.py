"""The many-machine recipe of docs/scaling.md on the real services, as a user runs it.

PostgreSQL (started by ``scripts/start_postgres.sh`` into a temporary folder on 127.0.0.1) holds the
Optuna study and the MLflow server's runs; ``mlflow server`` keeps its artifacts in a local folder.
Each worker is its own copy of the project (its own ``data/`` and ``results/``) whose model store
is one shared folder (standing for the network file system). Worker A is killed with SIGKILL in the
middle of a trial; worker B and a restart of A finish the table. Then: every trial has exactly one
result, no trial and no model was trained twice, the table is the one a single worker writes, and
every trial's run is on the MLflow server with its models, each stored model logged once (the shared
teacher too) by the run that trained it.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, SHARED_GLUE, make_tiny_bert, migrated_mlflow_db, write_tiny_glue

WORKER_TIMEOUT_S = 600
PASSWORD = "s3cret-in-the-url"  # what one worker's storage URL carries
TRAIN_ROWS, DEV_ROWS = 32, 24
BATCH = 8

TINY_CONF = """
task: rte
glue_dir: {glue}
teacher:
  model: {teacher}
  max_seq_length: 32
  training: {{epochs: 1, batch_size: {batch}, eval_batch_size: 16, learning_rate: 1.0e-3, warmup_ratio: 0.0,
              log_every_steps: 1}}
student:
  num_layers: 2
  training: {{epochs: 1, batch_size: {batch}, eval_batch_size: 16, log_every_steps: 1}}
runtime: {{progress_bar: false, checkpoint_every_steps: 1}}
tracking: {{enabled: true, log_models: {log_models}}}
reproduce:
  table: tiny
  storage: {storage}
  results_dir: results
  heartbeat_interval: 1
  grace_period: 10
  bootstrap: {{resamples: 50, seed: 0, alpha: 0.05}}
  tables:
    tiny:
      paper: two methods by two seeds on a few dozen RTE rows
      tasks: [rte]
      seeds: {seeds}
      baseline: nkd
      selection: dev
      grid: {{training.learning_rate: {learning_rates}}}
      methods:
{methods}
"""


#: The tiny table: (seeds, learning rates, methods).
TINY_TABLE = ((1, 2), (1.0e-3,), ("nkd", "alp"))


def tiny_conf(glue: Path, teacher: Path, storage: str, log_models: bool = True, table=TINY_TABLE) -> str:
    """The tiny table's conf: ``methods`` (rows of ``distill_methods``) × RTE × ``seeds`` × ``learning_rates``
    (``table``)."""
    seeds, learning_rates, methods = table
    rows = "\n".join(f"        {m}: {{recipe: distill_methods.{m}, label: {m.upper()}}}" for m in methods)
    return TINY_CONF.format(
        glue=glue,
        teacher=teacher,
        batch=BATCH,
        storage=storage,
        log_models=log_models,
        seeds=list(seeds),
        learning_rates=list(learning_rates),
        methods=rows,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def glue_rows(root: Path) -> Path:
    """A few dozen rows of the real RTE (``../shared/glue``), or the tiny fixture's where it is absent."""
    source = SHARED_GLUE / "RTE"
    if not (source / "dev.tsv").is_file():
        return write_tiny_glue(root, "RTE", n_train=TRAIN_ROWS, n_dev=DEV_ROWS).parent
    (root / "RTE").mkdir(parents=True)
    for split, rows in (("train", TRAIN_ROWS), ("dev", DEV_ROWS)):
        lines = (source / f"{split}.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
        (root / "RTE" / f"{split}.tsv").write_text("".join(lines[: rows + 1]), encoding="utf-8")
    return root


def wait_for(condition, what: str, timeout: float, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process is not None and process.poll() is not None:
            raise AssertionError(f"{what}: the process ended first (exit {process.returncode})")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.3)


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


class Services:
    """PostgreSQL by the project's script and an MLflow server on it, under ``root``; each can be stopped
    (killed) and started again. ``optuna``: the study's URL; ``tracking``: the server's URI."""

    def __init__(self, root: Path):
        # PostgreSQL refuses to run as root; the script then runs it as the postgres user, who must reach the folder.
        root.chmod(0o711)
        self.root, self.artifacts = root, root / "mlflow-artifacts"
        self.pg_port, self.mlflow_port = free_port(), free_port()
        self.env = {**os.environ, "PGDATA": str(root / "postgres"), "PGPORT": str(self.pg_port)}
        self.database = f"postgresql+psycopg://bert_kd@127.0.0.1:{self.pg_port}"
        self.optuna = f"{self.database}/bert_kd_optuna"
        self.tracking = f"http://127.0.0.1:{self.mlflow_port}"
        self.server: subprocess.Popen | None = None

    def postgres(self, *command: str) -> subprocess.CompletedProcess:
        """``scripts/start_postgres.sh`` (start) or ``… stop [fast|immediate]`` on this data folder."""
        script = REPO_ROOT / "scripts" / "start_postgres.sh"
        done = subprocess.run(
            ["bash", str(script), *command], env=self.env, capture_output=True, text=True, timeout=240
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    def start_mlflow(self) -> None:
        env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}  # no job consumers: 7 idle processes
        with open(self.root / "mlflow-server.log", "a") as server_log:
            self.server = subprocess.Popen(
                [
                    *(sys.executable, "-m", "mlflow", "server"),
                    *("--backend-store-uri", f"{self.database}/bert_kd_mlflow"),
                    *("--artifacts-destination", str(self.artifacts)),
                    *("--host", "127.0.0.1", "--port", str(self.mlflow_port), "--workers", "1"),
                ],
                stdout=server_log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
            )

    def kill_mlflow(self) -> None:
        if self.server is not None and self.server.poll() is None:
            os.killpg(self.server.pid, signal.SIGKILL)  # its uvicorn workers too
            self.server.wait(timeout=30)

    def close(self) -> None:
        try:
            self.kill_mlflow()
        finally:
            script = REPO_ROOT / "scripts" / "start_postgres.sh"
            subprocess.run(["bash", str(script), "stop"], env=self.env, capture_output=True, timeout=120)
            shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="module")
def services():
    """PostgreSQL by the project's script and an MLflow server on it ([`Services`][])."""
    running = Services(Path(tempfile.mkdtemp(prefix="bert_kd_services_")))
    running.postgres()
    running.start_mlflow()
    try:
        yield running
    finally:
        for process in STARTED:
            if process.poll() is None:
                process.kill()
                process.wait()
        running.close()


def project_copy(directory: Path, conf: str, store: Path | None) -> Path:
    """A checkout of the project: pyproject, conf/base, a conf/local with the tiny table; its model
    store a link to ``store`` (the shared file system) when given."""
    directory.mkdir(parents=True)
    shutil.copy(REPO_ROOT / "pyproject.toml", directory / "pyproject.toml")
    shutil.copytree(REPO_ROOT / "conf" / "base", directory / "conf" / "base")
    (directory / "conf" / "local").mkdir()
    (directory / "conf" / "local" / "parameters_many_machines.yml").write_text(conf)
    (directory / "src").mkdir()
    if store is not None:
        (directory / "data" / "06_models").mkdir(parents=True)
        (directory / "data" / "06_models" / "store").symlink_to(store, target_is_directory=True)
    return directory


STARTED: list[subprocess.Popen] = []  # every worker this module started (killed at its end if still running)


def worker(
    project: Path, tracking: str, log: Path, fault: str | None = None, params: str | None = None
) -> subprocess.Popen:
    """``kedro run --pipelines=reproduce`` in ``project``, as docs/scaling.md's step 3 (``params``: its
    ``--params``)."""
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MLFLOW_TRACKING_URI": tracking,
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GLUE_DIR", "MLFLOW_EXPERIMENT_ID", "BERT_KD_FAULT"):
        env.pop(name, None)
    if fault:
        env["BERT_KD_FAULT"] = fault
    with open(log, "w") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "kedro", "run", "--pipelines=reproduce", *(["--params", params] if params else [])],
            cwd=project,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    STARTED.append(process)
    return process


def finished(process: subprocess.Popen, log: Path) -> int:
    try:
        return process.wait(timeout=WORKER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        raise AssertionError(f"worker timed out:\n{log.read_text()[-3000:]}") from None


def succeeded(process: subprocess.Popen, log: Path) -> None:
    assert finished(process, log) == 0, log.read_text()[-4000:]


def table_rows(project: Path) -> list[dict]:
    (path,) = (project / "data" / "08_reporting" / "reproduce").glob("tiny*.csv")
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def trial_files(project: Path) -> dict[str, dict]:
    """The results folder: trial key -> its result."""
    files = (project / "results" / "tiny").rglob("*.json")
    return {record["trial"]: record for record in (json.loads(path.read_text()) for path in files)}


def entries(store: Path, kind: str) -> list[str]:
    return sorted(p.name for p in (store / kind).iterdir() if not p.name.startswith("."))


@pytest.mark.slow
def test_two_workers_and_a_killed_one_sweep_a_table_on_postgresql_and_an_mlflow_server(tmp_path, services):
    import mlflow
    import optuna

    started = time.monotonic()
    teacher = make_tiny_bert(tmp_path / "teacher")
    glue = glue_rows(tmp_path / "glue")

    def conf(storage: str, log_models: bool = True) -> str:
        return tiny_conf(glue, teacher, storage, log_models)

    # The table as one worker writes it: its own SQLite study, store and tracking database (run meanwhile).
    single = project_copy(tmp_path / "single", conf("sqlite:///data/09_sweeps/optuna.db", False), None)
    reference = worker(single, migrated_mlflow_db(single / "mlflow.db"), tmp_path / "single.log")
    wait_for(lambda: answers(services.tracking + "/health"), "the MLflow server", 150, services.server)

    store = tmp_path / "nfs" / "store"  # the network file system
    store.mkdir(parents=True)
    a = project_copy(tmp_path / "machine_a", conf(services.optuna), store)
    b = project_copy(tmp_path / "machine_b", conf(services.optuna), store)
    # Both workers start; A is killed (SIGKILL, by the job path's fault point) at the second step of the first
    # model it trains: the teacher or a student of its first trial. B takes that trial back and finishes.
    killed = worker(a, services.tracking, tmp_path / "a_killed.log", fault="step:2")
    # B names the study as docs/scaling.md shows, password and all (the server trusts 127.0.0.1, so any password
    # connects): it must end up written nowhere (checked at the end).
    with_password = services.optuna.replace("bert_kd@", f"bert_kd:{PASSWORD}@", 1)
    b_worker = worker(b, services.tracking, tmp_path / "b.log", params=f"reproduce.storage={with_password}")
    assert finished(killed, tmp_path / "a_killed.log") == -signal.SIGKILL, (tmp_path / "a_killed.log").read_text()
    succeeded(b_worker, tmp_path / "b.log")
    # A restarted: nothing left to train; it copies B's trials into its results folder and writes the table.
    succeeded(worker(a, services.tracking, tmp_path / "a_restarted.log"), tmp_path / "a_restarted.log")
    succeeded(reference, tmp_path / "single.log")
    print(f"\nmany-machine sweep: {time.monotonic() - started:.0f} s")

    # The table: the single worker's, in both checkouts (each results folder has every trial).
    assert table_rows(a) == table_rows(b) == table_rows(single)
    assert set(trial_files(a)) == set(trial_files(b)) == set(trial_files(single))
    assert len(trial_files(single)) == 4
    for key, record in trial_files(single).items():  # each trial's scores and dev predictions, the killed one's too
        for other in (a, b):
            result = trial_files(other)[key]["result"]
            for name in ("dev_metric", "teacher_dev_metric", "dev_predictions"):
                assert result.get(name) == record["result"].get(name), (key, name)

    # Optuna: every grid point trained exactly once to a result; the killed trial failed and was retried.
    (name,) = [n for n in optuna.get_all_study_names(services.optuna) if n.startswith("reproduce-tiny")]
    study = optuna.load_study(study_name=name, storage=services.optuna)
    trained = [
        t.user_attrs["key"]
        for t in study.get_trials(states=[optuna.trial.TrialState.COMPLETE])
        if "result" in t.user_attrs and not t.user_attrs.get("reused")
    ]
    assert sorted(trained) == sorted(trial_files(single))
    failed = study.get_trials(states=[optuna.trial.TrialState.FAIL])
    assert len(failed) == 1 and failed[0].user_attrs["key"] in trained  # A's, taken back by B
    assert not study.get_trials(states=[optuna.trial.TrialState.RUNNING])

    # The store: one teacher, one student per trial, no checkpoint left behind (the killed job's was resumed).
    assert len(entries(store, "teacher")) == 1 and len(entries(store, "student")) == 4
    assert not [p for p in (store / "checkpoints").rglob("*") if p.is_file()]

    # MLflow server: each trial's run finished once, with its models' files on the server's artifact store.
    client = mlflow.MlflowClient(tracking_uri=services.tracking)
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments, "tags.role = 'trial' and attributes.status = 'FINISHED'")
    assert sorted(r.data.params["trial"] for r in runs) == sorted(trained)
    assert {r.info.run_id for r in runs} == {record["result"]["run_id"] for record in trial_files(a).values()}
    models = client.search_logged_models(experiments)
    on_server = [str(path) for path in services.artifacts.rglob("model.safetensors")]
    students, teachers = entries(store, "student"), entries(store, "teacher")
    for kind, key in [("student", key) for key in students] + [("teacher", key) for key in teachers]:
        # every stored model is logged once, by the run that trained it: the shared teacher too, though the other
        # worker may reuse its entry while that run is still logging it (the reuser waits on the key's lock)
        logged = [m for m in models if m.tags.get("store_key") == key]
        assert len(logged) == 1, (kind, key, [(m.model_id, m.source_run_id) for m in logged])
        trained_in = json.loads((store / kind / key / "manifest.json").read_text())["provenance"]["mlflow_run_id"]
        assert logged[0].source_run_id == trained_in, (kind, key)
        assert any(logged[0].model_id in path for path in on_server), (kind, key, logged[0].model_id)

    assert_written_nowhere(PASSWORD, (tmp_path, services.root), client, experiments, study)


def assert_written_nowhere(secret: str, roots, client, experiments, study) -> None:
    """``secret`` is in no file under ``roots`` (checkouts, stores, logs, the servers' folders), no tag,
    parameter or name of any run or logged model on the MLflow server, and no attribute of the study."""
    leaks = [
        str(path)
        for root in roots
        for path in root.rglob("*")
        if path.is_file() and not path.is_symlink() and secret.encode() in path.read_bytes()
    ]
    assert not leaks, leaks
    runs = client.search_runs(experiments)
    assert runs and not [r.info.run_id for r in runs if secret in repr((r.data.tags, r.data.params, r.info.run_name))]
    models = client.search_logged_models(experiments)
    assert not [m.model_id for m in models if secret in repr((m.tags, m.params, m.name))]
    assert secret not in repr([(t.user_attrs, t.system_attrs, t.params) for t in study.get_trials()])


def test_the_slurm_array_script_starts_its_workers_on_the_shared_study():
    script = REPO_ROOT / "scripts" / "slurm_reproduce.sbatch"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    env = {
        **os.environ,
        "DRY_RUN": "1",
        "SLURM_ARRAY_JOB_ID": "77",
        "SLURM_ARRAY_TASK_ID": "3",
        "SLURM_CPUS_PER_TASK": "8",
        "WORKERS_PER_GPU": "2",
        "BERT_KD_STORAGE": "postgresql+psycopg://bert_kd@db-host:5433/bert_kd_optuna",
        "MLFLOW_TRACKING_URI": "http://mlflow-host:5000",
    }
    done = subprocess.run(["bash", str(script), "alp_kd_table1"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if not line.startswith("#")]
    assert len(lines) == 2  # one worker per WORKERS_PER_GPU
    for n, line in enumerate(lines, 1):
        assert "-m kedro run --pipelines=reproduce --env paper" in line and line.endswith(f"77-3-{n}.log")
        assert "reproduce.storage=postgresql+psycopg://bert_kd@db-host:5433/bert_kd_optuna" in line
    env.pop("BERT_KD_STORAGE")
    missing = subprocess.run(["bash", str(script), "alp_kd_table1"], env=env, capture_output=True, text=True)
    assert missing.returncode != 0 and "BERT_KD_STORAGE" in missing.stderr
