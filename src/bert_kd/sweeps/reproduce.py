"""One call from parameters to tables: parse the table, run this worker's share of its trials,
select, test and write the report. The Kedro ``reproduce`` node is a thin call of
[`reproduce`][] with ``run_trial`` = the job path ([`bert_kd.sweeps.trial.TrialRunner`][]).

A table is written under its own name (and into ``committed_dir``, the committed
``results/<table>/tables``) only by a run that covers it: every trial of the table at the table's
own data. A restricted or resized run writes a table named after its restriction
([`table_name`][]) into ``output_dir`` or ``data/08_reporting/reproduce``.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import socket
from pathlib import Path
from typing import Any, Mapping

from bert_kd.sweeps.budget import write_budget
from bert_kd.sweeps.objective import RunTrial
from bert_kd.sweeps.paper_tables import SweepReport, report_with_bootstrap, write_report
from bert_kd.sweeps.scheduler import SweepOptions, SweepTrialsFailedError, run_sweep, study_name_for
from bert_kd.sweeps.spec import SweepSpec, TrialSpec, build_sweep

log = logging.getLogger(__name__)

DEFAULT_OUTPUT_DIR = "data/08_reporting/reproduce"
RESTRICTIONS = ("tasks", "methods", "seeds", "grid")


def unwired_run_trial(spec: TrialSpec) -> dict:
    """Placeholder until the job path (``bert_kd.experiment.jobs``) runs a [`TrialSpec`][]."""
    raise NotImplementedError(
        f"no trial runner: pass run_trial=... (bert_kd.sweeps.trial.TrialRunner is the job path's); trial {spec.key}"
    )


def _name_part(name: str, value: Any) -> str:
    if isinstance(value, Mapping):
        value = " ".join(
            f"{k}={'|'.join(map(str, v if isinstance(v, (list, tuple)) else [v]))}" for k, v in value.items()
        )
    elif isinstance(value, (list, tuple)):
        value = " ".join(map(str, value))
    text = "all" if value is None else str(value)
    return f"{name}-" + re.sub(r"[^A-Za-z0-9._=+-]+", "-", text.replace("|", "+")).strip("-")


def table_name(sweep: SweepSpec, reproduce_params: Mapping, data_changes: Mapping[str, Any] | None = None) -> str:
    """``sweep.table`` when the run covers the whole table at its own data; else the table's name
    followed by the restriction and the data changes, e.g.
    ``cpu_protocol__tasks-mrpc__methods-nkd-alp__max_train_samples-64``."""
    parts = []
    keys = {t.key for t in sweep.trials()}
    if keys != set(sweep.universe):  # name the restrictions that leave out some value of their dimension

        def values(dimension: int, of) -> set[str]:  # trial key = method|task|seed=…|grid point
            return {key.split("|")[dimension] for key in of}

        dimensions = {"methods": 0, "tasks": 1, "seeds": 2, "grid": 3}
        parts += [
            _name_part(name, reproduce_params.get(name))
            for name in RESTRICTIONS
            if reproduce_params.get(name) not in (None, "", {}, [])
            and values(dimensions[name], keys) != values(dimensions[name], sweep.universe)
        ]
        parts = parts or ["restricted"]
    return variant_name(sweep.table, data_changes, parts)


def variant_name(table: str, changes: Mapping[str, Any] | None, restrictions: list[str] | None = None) -> str:
    """``table`` followed by its restriction parts and one part per data or setting change."""
    parts = [*(restrictions or []), *(_name_part(name, value) for name, value in sorted((changes or {}).items()))]
    return "__".join([table, *parts])


def reproduce(
    reproduce_params: Mapping,
    recipes: Mapping[str, Mapping],
    run_trial: RunTrial = unwired_run_trial,
    output_dir: str | Path | None = None,
    provenance: str = "",
    *,
    committed_dir: str | Path | None = None,
    results_only: bool = False,
) -> tuple[SweepReport, dict[str, Path]]:
    """Run ``reproduce.table`` (restricted by ``reproduce.tasks/methods/seeds/grid``) and write
    ``<name>.{csv,md,png}`` from every finished trial (``name``: [`table_name`][]); ``provenance``
    (the command and commit) is written under the Markdown table's caption.

    ``run_trial`` may also offer ``content_key(spec)`` (the trial's identity: a stored result made
    under another one is never reused), ``results_dir`` + ``stored_result(spec)`` (the results
    folder, first source of truth; with ``results_only`` the only one: nothing runs),
    ``data_changes(trials)`` / ``setting_changes(trials)`` (how the run's data and ``--params`` differ from
    the table's own) and ``use_variant_folder(name)`` — as [`bert_kd.sweeps.trial.TrialRunner`][] does. A run
    with such changes is a variant: its trial results go to ``<results folder>/variants/<table>__<changes>``
    (git-ignored), never among the table's own. A table covering the whole table at its own data
    goes to ``output_dir`` or ``committed_dir``; any other to ``output_dir`` or
    ``reproduce.output_dir`` or `DEFAULT_OUTPUT_DIR`, never ``committed_dir``. A table missing
    trials is never written into ``committed_dir``; when trials of this worker failed, the partial table
    is written and [`SweepTrialsFailedError`][] is raised (its
    ``report`` and ``paths`` are the partial table's).
    """
    sweep = build_sweep(reproduce_params, recipes)
    changes = run_trial.data_changes(sweep.trials()) if hasattr(run_trial, "data_changes") else {}
    if hasattr(run_trial, "setting_changes"):  # --params that change trials: a variant, never the table itself
        changes.update(run_trial.setting_changes(sweep.trials()))
    if hasattr(run_trial, "use_variant_folder"):  # a variant's trials are not the table's: kept apart from them
        run_trial.use_variant_folder(variant_name(sweep.table, changes) if changes else None)
        if changes and run_trial.results_dir:
            log.info(
                "reproduce %s: a variant (%s); its trial results go to %s, not to the table's folder",
                sweep.table,
                ", ".join(sorted(changes)),
                run_trial.results_dir,
            )
    stored = run_trial.stored_result if getattr(run_trial, "results_dir", None) else None
    storage = reproduce_params.get("storage") or "sqlite:///data/09_sweeps/optuna.db"
    failures: dict[str, str] = {}
    if results_only:
        if stored is None:
            raise ValueError("reproduce.results_only needs a results folder (reproduce.results_dir)")
        results = {t.key: r for t in sweep.trials() if (r := stored(t)) is not None}
    else:
        # A study on a database server is shared by machines: each worker's results folder adopts the trials
        # the others trained, and its model store must be the one they share (a SQLite study is one machine's).
        on_server = not str(storage).startswith("sqlite")
        options = SweepOptions(
            study_name=reproduce_params.get("study_name"),
            **{
                name: None if reproduce_params[name] is None else int(reproduce_params[name])
                for name in ("heartbeat_interval", "grace_period")
                if name in reproduce_params
            },  # else SweepOptions'
            identity=getattr(run_trial, "content_key", None),
            stored=stored,
            origin=f"{socket.gethostname()}:{Path(run_trial.results_dir).resolve()}" if stored and on_server else None,
            adopt=getattr(run_trial, "adopt_result", None),
            store_id=(  # made only once the storage has opened: a refused URL leaves no .store_id behind
                run_trial.model_store_id
                if on_server and hasattr(run_trial, "model_store_id") and reproduce_params.get("shared_store", True)
                else None
            ),
        )
        results = run_sweep(sweep, run_trial, storage, options, failures)
    missing = [t.key for t in sweep.trials() if t.key not in results]
    report = report_with_bootstrap(sweep, results, reproduce_params)
    report = dataclasses.replace(report, provenance=provenance)
    name = table_name(sweep, reproduce_params, changes)
    if missing:  # a table is written only from the trials it shows: a partial one never over the committed one
        directory = output_dir or reproduce_params.get("output_dir") or DEFAULT_OUTPUT_DIR
        if committed_dir is not None and Path(directory).resolve() == Path(committed_dir).resolve():
            directory = DEFAULT_OUTPUT_DIR
        log.warning(
            "%s: %d of %d trials have no valid result%s (shown as –; e.g. %s): the partial table goes to %s%s",
            "results_only" if results_only else f"reproduce {sweep.table}",
            len(missing),
            len(sweep.trials()),
            f" in {run_trial.results_dir}" if results_only else " (failed, or still running in another worker)",
            missing[0],
            directory,
            f", not over {committed_dir}" if committed_dir is not None else "",
        )
    elif name == sweep.table:
        directory = output_dir or committed_dir or reproduce_params.get("output_dir") or DEFAULT_OUTPUT_DIR
    else:
        directory = output_dir or reproduce_params.get("output_dir") or DEFAULT_OUTPUT_DIR
        if committed_dir is not None and Path(directory).resolve() == Path(committed_dir).resolve():
            directory = DEFAULT_OUTPUT_DIR  # the committed folder holds only tables of whole runs
        log.info(
            "reproduce %s: a restricted or resized run; its table is %s (the table itself is written only by "
            "a run of all its trials at its own data sizes)",
            sweep.table,
            name,
        )
    paths = write_report(report, directory, name)
    paths.update(write_budget(sweep, results, directory, name))  # expected best score vs trials, with a grid
    if failures:
        study = reproduce_params.get("study_name") or study_name_for(sweep)
        error = SweepTrialsFailedError(failures, len(sweep.trials()), study, str(paths["md"]))
        error.report, error.paths = report, paths  # the caller may still report the partial table
        raise error
    return report, paths
