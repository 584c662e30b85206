"""One call from parameters to tables: parse the table, run this worker's share of its trials,
select, test and write the report. The Kedro ``reproduce`` node will be a thin call of
:func:`reproduce` with ``run_trial`` = the shared job path (issue 8)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Mapping

from bert_kd.sweep.budget import write_budget
from bert_kd.sweep.report import SweepReport, build_report, write_report
from bert_kd.sweep.scheduler import RunTrial, run_sweep
from bert_kd.sweep.spec import TrialSpec, build_sweep


def unwired_run_trial(spec: TrialSpec) -> dict:
    """Placeholder until the job path (``bert_kd.jobs``) runs a :class:`TrialSpec`."""
    raise NotImplementedError(
        f"no trial runner: pass run_trial=... (the job path of issue 8 will provide one); trial {spec.key}"
    )


def reproduce(
    reproduce_params: Mapping,
    recipes: Mapping[str, Mapping],
    run_trial: RunTrial = unwired_run_trial,
    output_dir: str | Path | None = None,
    provenance: str = "",
) -> tuple[SweepReport, dict[str, Path]]:
    """Run ``reproduce.table`` (restricted by ``reproduce.tasks/methods/seeds``) and write
    ``<output_dir>/<table>.{csv,md,png}`` from every finished trial of the sweep; ``provenance``
    (the command and commit) is written under the Markdown table's caption."""
    sweep = build_sweep(reproduce_params, recipes)
    results = run_sweep(
        sweep, run_trial, reproduce_params.get("storage") or "sqlite:///data/09_sweeps/optuna.db",
        study_name=reproduce_params.get("study_name"),
        heartbeat_interval=int(reproduce_params.get("heartbeat_interval", 60)),
        grace_period=reproduce_params.get("grace_period", 180),
    )
    bootstrap = dict(reproduce_params.get("bootstrap") or {})
    report = build_report(sweep, results, resamples=int(bootstrap.get("resamples", 1000)),
                          seed=int(bootstrap.get("seed", 0)), alpha=float(bootstrap.get("alpha", 0.05)))
    report = dataclasses.replace(report, provenance=provenance)
    directory = output_dir or reproduce_params.get("output_dir") or "data/08_reporting/reproduce"
    paths = write_report(report, directory, sweep.table)
    paths.update(write_budget(sweep, results, directory, sweep.table))  # expected best score vs trials, with a grid
    return report, paths
