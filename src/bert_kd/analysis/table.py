"""A committed table folder (``results/<table>/``): its trial JSONs, checked against the table as
``conf/base`` defines it, and read as 0/1 correctness per (row, task, seed)."""

from __future__ import annotations

import collections
import functools
import json
from pathlib import Path

import numpy as np

from bert_kd.config.errors import UserError


def project_root(folder: Path) -> Path:
    """The project whose ``conf/base`` defines the table of ``folder`` (its nearest ancestor with one)."""
    for parent in Path(folder).resolve().parents:
        if (parent / "conf" / "base").is_dir():
            return parent
    raise UserError(
        f"{folder} is not inside a bert-kd project (no conf/base above it)",
        str(folder),
        "pass a table folder of the project, e.g. results/cpu_protocol_v2",
    )


@functools.cache
def table_params(folder: Path) -> dict:
    """The parameters the table of ``folder`` (named by the folder) runs with: conf/base, the table chosen."""
    from bert_kd.kedro_project.config_loader import ProjectConfigLoader
    from bert_kd.settings import CONFIG_LOADER_ARGS

    args = {**CONFIG_LOADER_ARGS, "default_run_env": "base"}  # conf/local is a user's, not the table's
    runtime = {"reproduce": {"table": folder.name}, "glue_dir": "../shared/glue"}
    return ProjectConfigLoader(str(project_root(folder) / "conf"), runtime_params=runtime, **args)["parameters"]


@functools.cache
def table_spec(folder: Path):
    """The sweep of ``folder``'s table ([`bert_kd.sweeps.spec.build_sweep`][]), so that counts of trials and seeds
    follow the configuration instead of being written here."""
    from bert_kd.sweeps.spec import RECIPE_NAMESPACES, build_sweep

    params = table_params(folder)
    tables = (params.get("reproduce") or {}).get("tables") or {}
    if folder.name not in tables:
        raise UserError(
            f"no table named {folder.name!r} in conf/base (reproduce.tables)",
            str(folder),
            f"pass a folder named after a table: {', '.join(sorted(tables))}",
        )
    return build_sweep(params["reproduce"], {ns: params.get(ns) or {} for ns in RECIPE_NAMESPACES})


@functools.cache
def table_keys(folder: Path) -> frozenset[str]:
    """The content keys of the table's trials: the only JSON names its folder may hold."""
    from bert_kd.sweeps.trial import trial_identity

    identity = trial_identity(table_params(folder))
    return frozenset(identity.content_key(trial) for trial in table_spec(folder).trials())


def table_total(folder: Path) -> int:
    """Trials the table asks for: every row × its tasks × the task's seeds."""
    return len(table_spec(folder).trials())


def trial_files(folder: Path) -> list[Path]:
    """The trial JSONs of ``folder``, refused by name unless every one is a trial of its table (another
    experiment's file would silently replace a seed's result)."""
    folder = Path(folder).resolve()
    paths = sorted(folder.glob("*.json"))
    foreign = [path.name for path in paths if path.stem not in table_keys(folder)]
    if foreign:
        raise UserError(
            f"{len(foreign)} JSON(s) are not trials of {folder.name} as conf/base defines it (e.g. {foreign[0]})",
            str(folder),
            "move a variant's or another table's results out of the folder",
        )
    return paths


def read_trial(path: Path) -> dict:
    """One trial JSON of a table folder; a truncated or otherwise unreadable one is a [`UserError`][]
    naming the file (a table folder holds hundreds)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        record["spec"]["trial"], record["result"], record["key"]  # noqa: B018 - the fields every reading uses
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
        where = f"{path}:{exc.lineno}:{exc.colno}" if isinstance(exc, json.JSONDecodeError) else str(path)
        problem = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise UserError(
            f"trial result {path.name} cannot be read ({problem})",
            where,
            "restore it from git (git checkout -- <file>), or move it out of the folder and run its trial again",
        ) from exc
    check_metrics(record, path)
    return record


#: How far a recorded dev metric may lie from the one its predictions give (float rounding only).
METRIC_TOLERANCE = 1e-9


def check_metrics(record: dict, path: Path) -> None:
    """Recompute the trial's dev metrics from its predictions and labels: a prediction list cut short, or a metric
    its predictions do not give (an edited or flipped file would change published claims silently), is a
    [`UserError`][] naming the file and the field."""
    from bert_kd.core.metrics import glue_metrics

    result, task = record["result"], record["spec"]["trial"].get("task")
    fix = "restore it from git (git checkout -- <file>), or move it out of the folder and run its trial again"
    predictions, labels = result.get("dev_predictions"), result.get("dev_labels")
    if predictions is None or labels is None:
        raise UserError(f"trial result {path.name} has no dev_predictions or dev_labels", str(path), fix)
    if len(predictions) != len(labels):
        raise UserError(
            f"trial result {path.name}: {len(predictions)} dev_predictions for {len(labels)} dev_labels",
            f"{path}: result.dev_predictions",
            fix,
        )
    recorded = result.get("dev_metrics") or {}
    given = glue_metrics(str(task), predictions, labels) if recorded else {}
    for name, value in recorded.items():
        if name in given and abs(float(value) - given[name]) > METRIC_TOLERANCE:
            raise UserError(
                f"trial result {path.name}: result.dev_metrics.{name} is {float(value):.6f}, its predictions give "
                f"{given[name]:.6f} (the file was edited after its trial ran)",
                f"{path}: result.dev_metrics.{name}",
                fix,
            )


def table_folder(folder: Path) -> Path:
    """``folder`` resolved, when it is a table's folder (named after a table of conf/base) holding trial
    JSONs; a [`UserError`][] otherwise, before anything is written."""
    folder = Path(folder).resolve()
    table_spec(folder)  # a folder named after no table: one block listing the tables
    if not any(folder.glob("*.json")):
        raise UserError(
            f"{folder} holds no trial results (*.json): there is nothing to read",
            str(folder),
            f"run the table's sweep first (kedro run --pipelines=reproduce --params reproduce.table={folder.name}), "
            "or pass the folder its results are in",
        )
    return folder


def load_runs(folder: Path) -> tuple[dict[tuple[str, str], dict[int, dict]], dict[str, float]]:
    """(row, task) → seed → result, and task → the teacher's dev accuracy (from any trial of the task)."""
    runs: dict[tuple[str, str], dict[int, dict]] = collections.defaultdict(dict)
    teacher: dict[str, float] = {}
    for path in trial_files(folder):
        record = read_trial(path)
        trial, result = record["spec"]["trial"], record["result"]
        runs[(trial["method"], trial["task"])][int(trial["seed"])] = result
        accuracy = (result.get("teacher_dev_metrics") or {}).get("accuracy")
        if accuracy is not None:
            teacher[trial["task"]] = float(accuracy)
    return dict(runs), teacher


def correct(result: dict) -> np.ndarray:
    """0/1 correctness of every dev example of one trial's result."""
    return (np.asarray(result["dev_predictions"]) == np.asarray(result["dev_labels"])).astype(np.int8)


def accuracy(result: dict) -> float:
    return float(correct(result).mean())


def task_label(task: str) -> str:
    return task.upper().replace("SST2", "SST-2")
