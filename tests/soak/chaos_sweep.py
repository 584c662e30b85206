"""Chaos soak of the many-machine sweep: faults injected at random, repeatedly, while invariants are checked.

Three workers (``kedro run --pipelines=reproduce``, each its own checkout as in docs/scaling.md) sweep a table of
24 tiny trials (NKD, ALP, RKD × 4 seeds × 2 learning rates on a few dozen RTE rows, tiny models) on one
PostgreSQL study and one MLflow server, their model store one shared folder on a small tmpfs. A fault schedule,
drawn from ``--seed`` and printed before it starts (the same seed replays it), SIGKILLs or SIGTERMs a random
worker every 20–60 s, restarts PostgreSQL (as a crash: ``pg_ctl stop -m immediate``) once and the MLflow server
(SIGKILL) once, and fills the store's disk once. A worker that ends (killed, or stopped by one block) is started
again, as a cluster's scheduler requeues a job; the soak stops by itself once every worker has the whole table,
or at ``--budget`` seconds. Then it checks:

- every trial has exactly one result file in every worker's results folder, and was trained to a result once;
- each worker's table and every trial's scores and predictions equal those of one worker alone (SQLite);
- no stored model is logged twice (LoggedModels per store key) and every store entry passes the store check;
- no MLflow run is left ``RUNNING``;
- no half-written file in the store or the results folders (temporary names), no result file that does not read;
- every worker run ended in one of: success, the soak's own kill, or one ``bert-kd:`` block (exit 2) — never an
  exit 1 (a bug), never a SIGTERM that took over ``SIGTERM_GRACE_S`` to end the worker.

It writes ``<out>.json`` (machine-made: schedule, faults injected by kind, each worker run, invariants, seconds of
work lost, seed, commit, load) and ``<out>.md``::

    HF_HUB_OFFLINE=1 nice -n 10 .venv/bin/python tests/soak/chaos_sweep.py --seed 1 \\
        --out benchmarks/results/chaos_sweep_seed1

Root is needed for the tmpfs (``mount -t tmpfs``); without it the store's disk is filled on the disk it is on,
leaving a quota-like margin (``--no-tmpfs``), and the record says so.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
for _path in (REPO_ROOT, REPO_ROOT / "src"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

WORKERS = 3
SEEDS, LEARNING_RATES, METHODS = (1, 2, 3, 4), (1.0e-3, 5.0e-4), ("nkd", "alp", "rkd")
#: A student's epochs on its 32 rows: at 30 a trial takes about 12 s on the quiet 2-core machine (at 1, under one
#: second: the table was done in 150 s, before most of the schedule's faults, its service restarts included).
STUDENT_EPOCHS = 30
SIGTERM_GRACE_S = 30  # a worker sent SIGTERM must end within this
RESTART_AFTER_S = 3.0  # a worker that ended is started again after this (a scheduler's requeue)
STORE_DISK = "32m"  # the tmpfs the shared model store lives on
TRIAL_BEGUN = "GLUE rte:"  # the log line of a trial reading its data


STOP: list[int] = []  # a signal number once the soak is told to stop (SIGTERM): it ends, checks and records


@dataclasses.dataclass(frozen=True)
class Fault:
    """One fault: at ``at`` seconds into the soak, ``kind`` (``sigkill``/``sigterm`` of ``worker``, or a
    service's ``restart_postgres``/``restart_mlflow``, or ``fill_disk``), held ``hold`` seconds."""

    at: float
    kind: str
    worker: int | None = None
    hold: float = 0.0


#: The faults that happen once per soak: (kind, earliest, latest second, seconds held).
ONCE = (("restart_postgres", 40, 150, 10.0), ("restart_mlflow", 60, 180, 10.0), ("fill_disk", 30, 200, 20.0))


def fault_schedule(seed: int, span: float = 420.0, workers: int = WORKERS) -> list[Fault]:
    """The soak's faults for ``seed``, in time order: a SIGKILL or SIGTERM of a random worker every 20–60 s up
    to ``span`` seconds, and each fault of [`ONCE`][] at a random time in its window. Same seed, same list."""
    rng = random.Random(seed)
    faults, at = [], rng.uniform(20, 60)
    while at < span:
        faults.append(Fault(round(at, 1), rng.choice(("sigkill", "sigterm")), rng.randrange(workers)))
        at += rng.uniform(20, 60)
    faults += [Fault(round(rng.uniform(lo, hi), 1), kind, None, hold) for kind, lo, hi, hold in ONCE]
    return sorted(faults, key=lambda f: f.at)


@dataclasses.dataclass
class WorkerRun:
    """One start of one worker: its process, log, and how it ended."""

    worker: int
    started: float
    log: Path
    process: subprocess.Popen
    ended: float | None = None
    exit: int | None = None
    fault: str | None = None  # the soak's own signal, when it ended the run
    block: str | None = None  # the bert-kd block it ended with (exit 2)

    def summary(self) -> dict:
        return {
            "worker": self.worker,
            "pid": self.process.pid,
            "started_s": round(self.started, 1),
            "ended_s": None if self.ended is None else round(self.ended, 1),
            "exit": self.exit,
            "fault": self.fault,
            "block": self.block,
            "log": self.log.name,
        }


def last_block(text: str) -> str | None:
    """The ``bert-kd:`` block a run ended with (its first line), if any."""
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith("bert-kd:")]
    return lines[-1][:300] if lines else None


class Soak:
    """The workers, the services and the fault schedule of one soak."""

    def __init__(self, root: Path, seed: int, budget: float, tmpfs: bool):
        from tests.sweeps.test_many_machines import Services

        self.root, self.seed, self.budget = root, seed, budget
        root.chmod(0o711)  # PostgreSQL runs as the postgres user, who must reach its folder
        (root / "services").mkdir()
        self.services = Services(root / "services")
        self.store = root / "nfs" / "store"
        self.tmpfs = tmpfs
        self.runs: list[WorkerRun] = []
        self.current: dict[int, WorkerRun | None] = {}
        self.events: list[dict] = []
        self.pending: list[tuple[float, str, object]] = []  # (when, action, argument): restarts, fault ends
        self.t0 = time.monotonic()
        self.killed: dict[int, datetime.datetime] = {}  # pid -> when the soak's signal was sent

    def now(self) -> float:
        return time.monotonic() - self.t0

    def note(self, kind: str, **fields) -> None:
        event = {"at_s": round(self.now(), 1), "kind": kind, **fields}
        self.events.append(event)
        print(json.dumps(event), flush=True)

    # --- set-up -------------------------------------------------------------------------------------
    def start(self, projects: list[Path]) -> None:
        self.services.postgres()
        self.services.start_mlflow()
        self.projects = projects

    def mount_store(self) -> None:
        disk = self.store.parent
        disk.mkdir(parents=True)
        if self.tmpfs:
            done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={STORE_DISK}", "tmpfs", str(disk)])
            self.tmpfs = done.returncode == 0
        self.store.mkdir()

    def unmount_store(self) -> None:
        if self.tmpfs:
            subprocess.run(["umount", "-l", str(self.store.parent)])

    # --- workers ------------------------------------------------------------------------------------
    def start_worker(self, n: int) -> None:
        from tests.sweeps.test_many_machines import worker

        count = sum(1 for r in self.runs if r.worker == n)
        log = self.root / f"worker{n}_{count}.log"
        run = WorkerRun(n, self.now(), log, worker(self.projects[n], self.services.tracking, log))
        self.runs.append(run)
        self.current[n] = run
        self.note("worker_started", worker=n, pid=run.process.pid)

    def finished_folder(self, n: int) -> bool:
        from tests.sweeps.test_many_machines import trial_files

        return len(trial_files(self.projects[n])) == len(SEEDS) * len(LEARNING_RATES) * len(METHODS)

    def poll_workers(self) -> None:
        for n, run in list(self.current.items()):
            if run is None or run.process.poll() is None:
                continue
            run.ended, run.exit = self.now(), run.process.returncode
            text = run.log.read_text(errors="replace")
            run.block = last_block(text) if run.exit == 2 else None
            self.note("worker_ended", worker=n, pid=run.process.pid, exit=run.exit, fault=run.fault, block=run.block)
            self.current[n] = None
            if not (run.exit == 0 and self.finished_folder(n)):
                delay = RESTART_AFTER_S if run.exit != 0 else 10.0
                self.pending.append((self.now() + delay, "start_worker", n))

    def done(self) -> bool:
        return all(
            self.current.get(n) is None and not any(a == "start_worker" and x == n for _, a, x in self.pending)
            for n in range(WORKERS)
        )

    # --- faults -------------------------------------------------------------------------------------
    def in_a_trial(self, n: int) -> bool:
        """Whether worker ``n`` runs and has begun a trial (its log says it read the trial's data)."""
        run = self.current.get(n)
        return run is not None and run.process.poll() is None and TRIAL_BEGUN in run.log.read_text(errors="replace")

    def signal_worker(self, fault: Fault) -> None:
        """SIGKILL or SIGTERM the fault's worker; one still starting (no trial begun: a kill there tests nothing
        and, on a busy machine, would keep it from ever reaching a trial) passes the fault to the next worker in
        a trial, else the fault is skipped."""
        order = [(fault.worker + i) % WORKERS for i in range(WORKERS)]
        target = next((n for n in order if self.in_a_trial(n)), None)
        if target is None:
            self.note("fault_skipped", fault=fault.kind, worker=fault.worker, reason="no worker in a trial")
            return
        fault = dataclasses.replace(fault, worker=target)
        run = self.current[target]
        sig = signal.SIGKILL if fault.kind == "sigkill" else signal.SIGTERM
        run.fault = fault.kind
        self.killed[run.process.pid] = datetime.datetime.now()
        run.process.send_signal(sig)
        self.note("fault", fault=fault.kind, worker=fault.worker, pid=run.process.pid)
        if sig == signal.SIGTERM:
            began = time.monotonic()
            try:
                run.process.wait(timeout=SIGTERM_GRACE_S)
                self.note("sigterm_obeyed", worker=fault.worker, seconds=round(time.monotonic() - began, 1))
            except subprocess.TimeoutExpired:  # SIGABRT: Python's faulthandler writes every thread's stack to the log
                run.process.send_signal(signal.SIGABRT)
                try:
                    run.process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    run.process.kill()
                run.fault = "sigterm_ignored"
                self.note("sigterm_ignored", worker=fault.worker, pid=run.process.pid)

    def inject(self, fault: Fault) -> None:
        if fault.kind in ("sigkill", "sigterm"):
            self.signal_worker(fault)
        elif fault.kind == "restart_postgres":
            self.services.postgres("stop", "immediate")
            self.note("fault", fault=fault.kind)
            self.pending.append((self.now() + fault.hold, "postgres_up", None))
        elif fault.kind == "restart_mlflow":
            self.services.kill_mlflow()
            self.note("fault", fault=fault.kind)
            self.pending.append((self.now() + fault.hold, "mlflow_up", None))
        elif fault.kind == "fill_disk":
            filler = self.store.parent / "filler"
            with open(filler, "wb") as handle:
                try:
                    while True:
                        handle.write(b"\0" * (1 << 20))
                        handle.flush()
                except OSError:
                    pass
            self.note("fault", fault=fault.kind, filled_mb=round(filler.stat().st_size / 2**20, 1), tmpfs=self.tmpfs)
            self.pending.append((self.now() + fault.hold, "disk_freed", filler))

    def act(self, action: str, argument) -> None:
        if action == "start_worker":
            self.start_worker(argument)
        elif action == "postgres_up":
            self.services.postgres()
            self.note("service_back", service="postgres")
        elif action == "mlflow_up":
            self.services.start_mlflow()
            self.note("service_back", service="mlflow")
        elif action == "disk_freed":
            argument.unlink()
            self.note("service_back", service="disk")

    def run(self, schedule: list[Fault]) -> bool:
        """Inject ``schedule`` while the workers sweep; True when every worker finished its table in time."""
        queue = list(schedule)
        for n in range(WORKERS):
            self.start_worker(n)
        clock = None  # the schedule's time 0: the first trial begun (a busy machine takes minutes to start workers)
        while self.now() < self.budget and not STOP:
            self.poll_workers()
            for item in sorted(p for p in self.pending if p[0] <= self.now()):
                self.pending.remove(item)
                self.act(item[1], item[2])
            if self.done():
                break
            clock = self.tick(queue, clock)
            time.sleep(0.5)
        self.not_injected = [dataclasses.asdict(f) for f in queue]
        return self.wind_down()

    def tick(self, queue: list[Fault], clock: float | None) -> float | None:
        """Start the fault clock at the first trial begun; inject the faults that are due. → the clock."""
        if clock is None and any(self.in_a_trial(n) for n in range(WORKERS)):
            clock = self.now()
            self.note("fault_clock_started")
        while clock is not None and queue and queue[0].at <= self.now() - clock:
            self.inject(queue.pop(0))
        return clock

    def wind_down(self) -> bool:
        """Bring back what is still down, end the workers still running; whether the sweep had finished."""
        for item in sorted(self.pending):  # a service still down or a disk still full comes back
            if item[1] != "start_worker":
                self.act(item[1], item[2])
        finished = self.done()
        for run in self.current.values():
            if run is not None and run.process.poll() is None:
                run.process.kill()
                run.process.wait()
        self.poll_workers()
        return finished


# --- invariants -------------------------------------------------------------------------------------------


def result_files(project: Path) -> collections.Counter:
    """Trial key -> how many result files the results folder holds for it."""
    counts: collections.Counter = collections.Counter()
    for path in (project / "results" / "tiny").rglob("*.json"):
        record = json.loads(path.read_text())
        if isinstance(record, dict) and "trial" in record:
            counts[record["trial"]] += 1
    return counts


def whole_table(project: Path, reference: Path) -> list[dict] | None:
    """The rows of the table the reference wrote (its file name; not the ``_budget`` one), as ``project`` wrote
    it; None when absent."""
    import csv

    folder = Path("data") / "08_reporting" / "reproduce"
    (name,) = [p.name for p in (reference / folder).glob("tiny*.csv") if not p.name.endswith("_budget.csv")]
    if not (project / folder / name).is_file():
        return None
    with open(project / folder / name, newline="") as handle:
        return list(csv.DictReader(handle))


def half_written(*folders: Path) -> list[str]:
    """Files with a temporary name (a write cut before its rename) under ``folders``."""
    marks = (".tmp", ".partial", "tmp-", ".incomplete")
    return sorted(
        str(p) for folder in folders if folder.exists() for p in folder.rglob("*") if any(m in p.name for m in marks)
    )


def check(soak: Soak, reference: Path) -> dict:
    """Every invariant of the module's docstring: name -> {"ok": bool, ...details}."""
    import mlflow
    import optuna

    from bert_kd.experiment.jobs import store_entry_problem
    from tests.sweeps.test_many_machines import trial_files

    total = len(SEEDS) * len(LEARNING_RATES) * len(METHODS)
    found: dict[str, dict] = {}
    counts = {n: result_files(p) for n, p in enumerate(soak.projects)}
    found["one_result_file_per_trial"] = {
        "ok": all(len(c) == total and set(c.values()) == {1} for c in counts.values()),
        "files": {n: sum(c.values()) for n, c in counts.items()},
    }
    reference_trials = trial_files(reference)
    same = []
    for n, project in enumerate(soak.projects):
        trials = trial_files(project)
        for key, record in reference_trials.items():
            for name in ("dev_metric", "teacher_dev_metric", "dev_predictions"):
                if trials.get(key, {}).get("result", {}).get(name) != record["result"].get(name):
                    same.append(f"worker {n}: {key}: {name}")
    tables = {n: whole_table(p, reference) for n, p in enumerate(soak.projects)}
    tables = {n: rows for n, rows in tables.items() if rows is not None}
    found["table_equals_single_worker"] = {
        "ok": len(reference_trials) == total
        and len(tables) == WORKERS
        and all(rows == whole_table(reference, reference) for rows in tables.values())
        and not same,
        "differences": same[:20],
        "tables": len(tables),
    }
    study_name = next(n for n in optuna.get_all_study_names(soak.services.optuna) if n.startswith("reproduce-tiny"))
    study = optuna.load_study(study_name=study_name, storage=soak.services.optuna)
    trials = study.get_trials(deepcopy=False)
    trained = collections.Counter(
        t.user_attrs["key"]
        for t in trials
        if t.state == optuna.trial.TrialState.COMPLETE and "result" in t.user_attrs and not t.user_attrs.get("reused")
    )
    found["trained_once"] = {
        "ok": len(trained) == total and set(trained.values()) == {1},
        "twice": sorted(k for k, c in trained.items() if c > 1),
        "running_trials_left": sum(t.state == optuna.trial.TrialState.RUNNING for t in trials),
    }
    client = mlflow.MlflowClient(tracking_uri=soak.services.tracking)
    experiments = [e.experiment_id for e in client.search_experiments()]
    models = client.search_logged_models(experiments)
    by_key = collections.Counter(m.tags.get("store_key") for m in models if m.tags.get("store_key"))
    kinds = {k: sorted((soak.store / k).iterdir()) if (soak.store / k).is_dir() else [] for k in ("teacher", "student")}
    problems = {
        p.name: store_entry_problem(p) for entries in kinds.values() for p in entries if not p.name.startswith(".")
    }
    found["no_duplicate_models_or_entries"] = {
        "ok": not [k for k, c in by_key.items() if c > 1]
        and len(kinds["student"]) == total
        and len(kinds["teacher"]) == 1
        and not any(problems.values()),
        "logged_twice": sorted(k for k, c in by_key.items() if c > 1),
        "entries": {k: len(v) for k, v in kinds.items()},
        "damaged": {k: v for k, v in problems.items() if v},
        "set_aside": sorted(p.name for v in kinds.values() for p in v if ".corrupt-" in p.name),
    }
    running = client.search_runs(experiments, "attributes.status = 'RUNNING'")
    found["no_run_left_running"] = {"ok": not running, "running": [r.info.run_id for r in running]}
    leftovers = half_written(soak.store, *(p / "results" for p in soak.projects))
    found["nothing_half_written"] = {"ok": not leftovers, "files": leftovers[:20]}
    bad = [
        r.summary()
        for r in soak.runs
        if not (r.exit == 0 or r.fault in ("sigkill", "sigterm") or (r.exit == 2 and r.block))
    ]
    found["workers_stopped_cleanly"] = {"ok": not bad, "runs": bad}
    found["work_lost_s"] = {"ok": True, "seconds": round(work_lost(trials, soak.killed), 1)}
    return found


def work_lost(trials, killed: dict[int, datetime.datetime]) -> float:
    """Seconds of training thrown away: each failed trial from its start to its end (to the soak's signal, for a
    trial whose worker the soak killed)."""
    import optuna

    lost = 0.0
    for t in trials:
        if t.state != optuna.trial.TrialState.FAIL or t.datetime_start is None:
            continue
        owner = t.user_attrs.get("owner") or {}
        end = killed.get(owner.get("pid")) or t.datetime_complete or t.datetime_start
        lost += max(0.0, (end - t.datetime_start).total_seconds())
    return lost


# --- the soak ---------------------------------------------------------------------------------------------


def reference(cache: Path, conf) -> Path:
    """The single-worker table's project in ``cache`` (with the tiny teacher and GLUE rows the soak's workers use
    too), made once per source tree: the same table by one worker on its own SQLite study, store and tracking
    database, without faults."""
    from tests.conftest import make_tiny_bert, migrated_mlflow_db
    from tests.sweeps.test_many_machines import glue_rows, project_copy, succeeded, worker

    single = cache / "single"
    if (cache / "complete").is_file():
        return single
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    make_tiny_bert(cache / "teacher")
    glue_rows(cache / "glue")
    project_copy(single, conf("sqlite:///data/09_sweeps/optuna.db", False), None)
    began = time.monotonic()
    succeeded(worker(single, migrated_mlflow_db(single / "mlflow.db"), cache / "single.log"), cache / "single.log")
    (cache / "complete").write_text(f"{time.monotonic() - began:.0f}\n")
    return single


def student_epochs(conf: str, epochs: int) -> str:
    """The tiny table's ``conf`` with its students trained ``epochs`` epochs (it says one)."""
    line = "  training: {epochs: 1, batch_size: "
    student = conf.index("student:")
    at = conf.index(line, student)
    return conf[:at] + line.replace("1", str(epochs)) + conf[at + len(line) :]


def cache_folder() -> Path:
    """Where the reference lives: keyed by the trees of what computes a trial (``core``, ``experiment``,
    ``conf/base``) and the table; a change of either makes it again."""
    trees = subprocess.run(
        ["git", "rev-parse", "HEAD:src/bert_kd/core", "HEAD:src/bert_kd/experiment", "HEAD:conf/base"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    ).stdout.split()
    material = json.dumps([trees, SEEDS, LEARNING_RATES, METHODS, STUDENT_EPOCHS]).encode()
    return Path(tempfile.gettempdir()) / f"bert_kd_chaos_reference_{hashlib.sha256(material).hexdigest()[:12]}"


def commit() -> str:
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT, capture_output=True)
    return done.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def soak(seed: int, budget: float, tmpfs: bool) -> dict:
    from tests.sweeps.test_many_machines import answers, project_copy, tiny_conf, wait_for

    schedule = fault_schedule(seed)
    print(f"chaos soak, seed {seed} (the same seed replays this schedule):", flush=True)
    for fault in schedule:
        print("  " + json.dumps(dataclasses.asdict(fault)), flush=True)
    made_at = commit()  # the code that runs, read before anything else may change the checkout
    root = Path(tempfile.mkdtemp(prefix="bert_kd_chaos_"))
    cache = cache_folder()
    reused = (cache / "complete").is_file()

    def conf(storage: str, log_models: bool = True) -> str:
        text = tiny_conf(cache / "glue", cache / "teacher", storage, log_models, (SEEDS, LEARNING_RATES, METHODS))
        return student_epochs(text, STUDENT_EPOCHS)

    single = reference(cache, conf)
    load_before, began = os.getloadavg(), time.monotonic()
    run = Soak(root, seed, budget, tmpfs)
    run.mount_store()
    finished, invariants = False, {}
    try:
        projects = [project_copy(root / f"machine_{n}", conf(run.services.optuna), run.store) for n in range(WORKERS)]
        run.start(projects)
        wait_for(lambda: answers(run.services.tracking + "/health"), "the MLflow server", 150, run.services.server)
        run.t0 = time.monotonic()
        finished = run.run(schedule)
        try:  # also when unfinished: what holds of a sweep cut short
            invariants = check(run, single)
        except Exception as error:  # a service that did not come back, a store never made
            invariants = {"checked": {"ok": False, "error": repr(error)[:300]}}
    finally:
        for process in (r.process for r in run.runs):
            if process.poll() is None:
                process.kill()
        record_logs(run, root)
        run.services.close()
        run.unmount_store()
        if finished and invariants and all(v["ok"] for v in invariants.values()):
            shutil.rmtree(root, ignore_errors=True)  # else kept for a look
    injected = collections.Counter(e["fault"] for e in run.events if e["kind"] == "fault")
    return {
        "seed": seed,
        "commit": made_at,
        "finished": finished,
        "stopped_by_signal": bool(STOP),
        "passed": finished and all(v["ok"] for v in invariants.values()),
        "wall_s": round(time.monotonic() - began, 1),
        "sweep_s": round(run.now(), 1),
        "trials": len(SEEDS) * len(LEARNING_RATES) * len(METHODS),
        "workers": WORKERS,
        "store_disk": f"tmpfs {STORE_DISK}" if run.tmpfs else "the temporary folder's disk (no tmpfs)",
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "cores": os.cpu_count(),
        "faults_injected": dict(injected),
        "faults_skipped": sum(e["kind"] == "fault_skipped" for e in run.events),
        "faults_not_reached": run.not_injected,
        "sigterm_seconds": [e["seconds"] for e in run.events if e["kind"] == "sigterm_obeyed"],
        "worker_runs": [r.summary() for r in run.runs],
        "reference": f"{'reused' if reused else 'made'}: {cache}",
        "invariants": invariants,
        "schedule": [dataclasses.asdict(f) for f in schedule],
        "events": run.events,
    }


def record_logs(run: Soak, root: Path) -> None:
    """Keep the workers' logs beside the record's temporary folder for a look after a failure."""
    keep = Path(tempfile.gettempdir()) / f"bert_kd_chaos_logs_seed{run.seed}"
    keep.mkdir(exist_ok=True)
    for path in [*root.glob("*.log"), root / "services" / "mlflow-server.log"]:
        if path.is_file():
            (keep / path.name).write_bytes(path.read_bytes())


def markdown(record: dict) -> str:
    inv = record["invariants"]
    lines = [
        f"# Chaos soak of the sweep, seed {record['seed']}",
        "",
        f"Made by `tests/soak/chaos_sweep.py --seed {record['seed']}` at commit `{record['commit']}` "
        f"(machine-made; the JSON beside this file has every event).",
        "",
        f"- **{'passed' if record['passed'] else 'FAILED' if record['finished'] else 'UNFINISHED'}**: {record['trials']} trials, {record['workers']} workers, "
        f"sweep {record['sweep_s']} s (wall {record['wall_s']} s), store disk: {record['store_disk']}",
        f"- faults injected: {', '.join(f'{k} {v}' for k, v in sorted(record['faults_injected'].items()))}; "
        f"skipped (worker not running) {record['faults_skipped']}; not reached {len(record['faults_not_reached'])}",
        f"- SIGTERM to exit: {', '.join(f'{s} s' for s in record['sigterm_seconds']) or '–'}",
        f"- worker runs: {len(record['worker_runs'])}, exits "
        + ", ".join(
            f"{k}: {v}" for k, v in sorted(collections.Counter(str(r["exit"]) for r in record["worker_runs"]).items())
        ),
        f"- work lost: {inv.get('work_lost_s', {}).get('seconds', '–')} s of failed trials",
        f"- load average before / after: {record['load_before']} / {record['load_after']} on {record['cores']} cores",
        "",
        "| invariant | holds |",
        "|---|---|",
    ]
    lines += [f"| {name} | {'yes' if value['ok'] else 'NO'} |" for name, value in inv.items() if name != "work_lost_s"]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--budget", type=float, default=1200.0, help="seconds the sweep may take (faults end at 420 s)")
    parser.add_argument("--no-tmpfs", action="store_true", help="fill the store's own disk instead of a tmpfs")
    parser.add_argument("--out", type=Path, help="record path without suffix (.json and .md are written)")
    parser.add_argument("--print-schedule", action="store_true", help="print the seed's schedule and stop")
    args = parser.parse_args()
    if args.print_schedule:
        for fault in fault_schedule(args.seed):
            print(json.dumps(dataclasses.asdict(fault)))
        return 0
    signal.signal(signal.SIGTERM, lambda signum, _: STOP.append(signum))  # stop early, still check and record
    os.environ["PYTHONFAULTHANDLER"] = "1"  # a worker that outlives its SIGTERM shows where it is (SIGABRT)
    record = soak(args.seed, args.budget, not args.no_tmpfs)
    text = markdown(record)
    print(text)
    if args.out:
        from bert_kd.core.files import write_file_atomically

        args.out.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps(record, indent=1, default=str) + "\n"
        write_file_atomically(args.out.with_suffix(".json"), lambda path: path.write_text(body))
        write_file_atomically(args.out.with_suffix(".md"), lambda path: path.write_text(text))
    return 0 if record["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
