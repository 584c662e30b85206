"""Node of ``reproduce``: a thin call of [`bert_kd.sweeps.reproduce.reproduce`][] with the job-path
``run_trial`` ([`bert_kd.sweeps.trial`][]), plus the parent MLflow run's table."""

from __future__ import annotations

import logging
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from bert_kd.config.credentials import mask
from bert_kd.config.schema import Block, Reproduce, set_values, typed
from bert_kd.core.training.distributed import broadcast_from_rank_zero, launched_processes
from bert_kd.experiment.tracker import is_main_process, kedro_run
from bert_kd.sweeps.paper_tables import bars_figure, markdown
from bert_kd.sweeps.reproduce import reproduce
from bert_kd.sweeps.scheduler import SweepTrialsFailedError
from bert_kd.sweeps.spec import RECIPE_NAMESPACES
from bert_kd.sweeps.trial import TrialRunner
from bert_kd.sweeps.trial_identity import DATA_KEYS
from bert_kd.sweeps.trial_results import ResultsFolder

log = logging.getLogger(__name__)

#: Catalog entry holding the run's [`ReproduceRun`][]
#: (saved by [`ReproduceRunHook`][kedro_project.reproduce_run.ReproduceRunHook]).
REPRODUCE_RUN = "reproduce_run"


@dataclass(frozen=True)
class ReproduceRun:
    """What the ``reproduce`` node reads besides ``params:reproduce``, made once per run by a hook and handed
    over as a dataset rather than as ``params:`` inputs, so that kedro-mlflow logs only ``reproduce.*``.

    ``parameters``: the run's parameter tree (the trials' blocks and recipes); ``conf_params``: the same without
    the command line's ``--params`` (None: not known), so that a run whose ``--params`` change some trial is
    named as a variant of the table ([`setting_changes`][trial_identity.TrialIdentity.setting_changes]);
    ``cli_params``: the ``--params`` themselves (a ``max_train_samples`` given there replaces the table's
    per-task sizes, the one of ``parameters.yml`` does not)."""

    parameters: Mapping
    conf_params: Mapping | None = None
    cli_params: Mapping = field(default_factory=dict)


def reproduce_tables(reproduce_params: Block[Reproduce], run: ReproduceRun):
    """Run this worker's share of ``reproduce.table`` and return its tables (long CSV, Markdown, PNG).

    Trial results are read from / written to ``reproduce.results_dir/<table>`` (one JSON per trial; a
    variant run's — other data or key-changing ``--params`` — to its ``variants/`` folder); the tables go
    to ``<results_dir>/<table>/tables`` when the run covers the whole table at its own data sizes, else to
    ``data/08_reporting/reproduce/<table>__<restriction>.*`` ([`bert_kd.sweeps.reproduce.table_name`][]); the
    parent MLflow run gets the Markdown as its description and one ``compare/<method>/<task>`` metric per
    cell. A run whose ``--params`` change some
    trial's content key is named ``<table>__params-<hash>``, never written as the table itself
    ([`ReproduceRun`][]).
    """
    parameters, cli_params = run.parameters, dict(run.cli_params or {})
    settings = typed(Reproduce, reproduce_params, "reproduce")
    table = settings.table
    results_dir = Path(settings.results_dir) / str(table) if settings.results_dir else None
    folder = ResultsFolder(
        results_dir, command=mask(shlex.join(["kedro", *sys.argv[1:]])), results_only=settings.results_only
    )
    runner = TrialRunner(
        parameters,
        folder,
        data_overrides={k: cli_params[k] for k in DATA_KEYS if k in cli_params},
        conf_params=run.conf_params,
    )
    recipes = {namespace: parameters.get(namespace) or {} for namespace in RECIPE_NAMESPACES}
    if launched_processes() > 1 and not is_main_process():
        report = follow_trials(runner)
        return report.long, markdown(report), bars_figure(report, title=str(table))
    run_trial = LeadTrials(runner) if launched_processes() > 1 else runner
    failed = None
    try:
        report, paths = reproduce(
            set_values(settings),
            recipes,
            run_trial,
            output_dir=settings.output_dir,
            provenance=provenance(runner.results.command, runner.results.commit),
            committed_dir=results_dir / "tables" if results_dir else None,
            results_only=settings.results_only,
        )
    except SweepTrialsFailedError as error:  # the partial table is reported like a whole one, then the run fails
        report, paths, failed = error.report, error.paths, error
    if launched_processes() > 1:
        broadcast_from_rank_zero(None)  # no more trials
        broadcast_from_rank_zero(report)
    text = markdown(report)
    log.info("reproduce %s: tables in %s\n%s", table, paths["md"].parent, text)
    for line in report.warnings:  # every student ties on a task (bert_kd.core.reports.verdict)
        log.warning("reproduce %s: no best student on %s", table, line)
    for line in report.mixed_teachers:  # one row's seeds from different teachers (report.teacher_mismatches)
        log.warning("reproduce %s: mixed teachers: %s", table, line)
    _log_to_parent_run(report, text, paths)
    if failed is not None:
        raise failed
    return report.long, text, bars_figure(report, title=str(table))


class LeadTrials:
    """Rank 0's ``run_trial`` under torchrun: Optuna (rank 0 only) picks the trials; each one that
    trains is first sent to the other processes, which train it alongside ([`follow_trials`][]).
    Everything else (results folder, identity checks, data changes) is the runner's own."""

    def __init__(self, runner: TrialRunner):
        self.runner = runner

    def __getattr__(self, name: str):
        return getattr(self.runner, name)

    def __call__(self, spec):
        if self.runner.stored_result(spec) is None and not self.runner.results.results_only:
            broadcast_from_rank_zero(spec)
        return self.runner(spec)


def follow_trials(runner: TrialRunner):
    """The other ranks: train every trial rank 0 sends (no MLflow, no result files: rank 0 writes
    them) until it sends ``None``; then return rank 0's report."""
    while (spec := broadcast_from_rank_zero(None)) is not None:
        runner.train_and_evaluate(spec)
    return broadcast_from_rank_zero(None)


def provenance(command: str, commit: str | None) -> str:
    """The line under a committed table that says how to make it again."""
    return f"Made by: `{command}` at commit `{commit or 'unknown'}`."


def _log_to_parent_run(report, text: str, paths: dict) -> None:
    """The tables on the ``kedro run``'s run: the markdown (after any tie warning) as its description,
    each (method, task) mean as a metric, the written files as artifacts."""
    warnings = "".join(f"**No best student** on {line}.\n\n" for line in report.warnings)
    means = {(row.method, row.task): float(row.mean) for row in report.long.itertuples() if row.n > 0}
    kedro_run().log_reproduction(warnings + text, means, list(paths.values()))
