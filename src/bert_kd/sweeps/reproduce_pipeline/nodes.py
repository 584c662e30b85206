"""Node of ``reproduce``: a thin call of [`bert_kd.sweeps.reproduce.reproduce`][bert_kd.sweeps.reproduce.reproduce] with the job-path
``run_trial`` ([`bert_kd.sweeps.trial`][bert_kd.sweeps.trial]), plus the parent MLflow run's table."""

from __future__ import annotations

import copy
import logging
import shlex
import sys
from pathlib import Path

from kedro.framework.hooks import hook_impl

from bert_kd.config.credentials import mask
from bert_kd.config.schema import Block, Reproduce, set_values, typed
from bert_kd.core.training.distributed import broadcast_from_rank_zero, launched_processes
from bert_kd.experiment.tracker import is_main_process, kedro_run
from bert_kd.sweeps.paper_tables import bars_figure, markdown
from bert_kd.sweeps.reproduce import reproduce
from bert_kd.sweeps.scheduler import SweepTrialsFailedError
from bert_kd.sweeps.spec import RECIPE_NAMESPACES
from bert_kd.sweeps.trial import TrialRunner

log = logging.getLogger(__name__)

#: Catalog entry holding the ``--params`` of this ``kedro run`` (filled by [`CliParamsHook`][bert_kd.sweeps.reproduce_pipeline.nodes.CliParamsHook]).
CLI_PARAMS = "reproduce_cli_params"
#: Catalog entry holding the parameters as the configuration alone gives them (no ``--params``).
CONF_PARAMS = "reproduce_conf_params"
DATA_KEYS = ("max_train_samples", "max_eval_samples")


class CliParamsHook:
    """Hand the command line's ``--params`` to the ``reproduce`` node: a ``max_train_samples``
    given there replaces the table's per-task sizes, the one of ``parameters.yml`` does not. And the
    parameters without them (the context's loader with no runtime params), so that a run whose ``--params``
    change some trial is named as a variant of the table (``TrialRunner.setting_changes``)."""

    def __init__(self):
        self._loader = None

    @hook_impl
    def after_context_created(self, context) -> None:
        self._loader = context.config_loader

    @hook_impl
    def before_pipeline_run(self, run_params, pipeline, catalog) -> None:
        if CLI_PARAMS in pipeline.inputs():
            catalog.save(CLI_PARAMS, dict(run_params.get("runtime_params") or {}))
        if CONF_PARAMS in pipeline.inputs():
            catalog.save(CONF_PARAMS, conf_parameters(self._loader))


def conf_parameters(loader) -> dict | None:
    """``loader["parameters"]`` without its runtime params (the same conf folders and environment); None
    without a loader."""
    if loader is None:
        return None
    plain = copy.copy(loader)
    plain.runtime_params = {}
    return plain["parameters"]


def reproduce_tables(
    reproduce_params: Block[Reproduce], parameters: dict, cli_params: dict | None, conf_params: dict | None = None
):
    """Run this worker's share of ``reproduce.table`` and return its tables (long CSV, Markdown, PNG).

    Trial results are read from / written to ``reproduce.results_dir/<table>`` (one JSON per trial; a
    variant run's — other data or key-changing ``--params`` — to its ``variants/`` folder); the tables go
    to ``<results_dir>/<table>/tables`` when the run covers the whole table at its own data sizes, else to
    ``data/08_reporting/reproduce/<table>__<restriction>.*`` ([`bert_kd.sweeps.reproduce.table_name`][bert_kd.sweeps.reproduce.table_name]); the
    parent MLflow run gets the Markdown as its description and one ``compare/<method>/<task>`` metric per
    cell. ``conf_params`` (the parameters without ``--params``): a run whose ``--params`` change some
    trial's content key is named ``<table>__params-<hash>``, never written as the table itself.
    """
    cli_params = cli_params or {}
    settings = typed(Reproduce, reproduce_params, "reproduce")
    table = settings.table
    results_dir = Path(settings.results_dir) / str(table) if settings.results_dir else None
    runner = TrialRunner(
        parameters,
        data_overrides={k: cli_params[k] for k in DATA_KEYS if k in cli_params},
        results_dir=results_dir,
        command=mask(shlex.join(["kedro", *sys.argv[1:]])),
        results_only=settings.results_only,
        conf_params=conf_params,
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
            provenance=provenance(runner.command, runner.commit),
            committed_dir=results_dir / "tables" if results_dir else None,
            results_only=runner.results_only,
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
    trains is first sent to the other processes, which train it alongside ([`follow_trials`][bert_kd.sweeps.reproduce_pipeline.nodes.follow_trials]).
    Everything else (results folder, identity checks, data changes) is the runner's own."""

    def __init__(self, runner: TrialRunner):
        self.runner = runner

    def __getattr__(self, name: str):
        return getattr(self.runner, name)

    def __call__(self, spec):
        if self.runner.stored_result(spec) is None and not self.runner.results_only:
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
