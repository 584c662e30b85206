"""Sweeps over methods × tasks × seeds × grids: spec, scheduling on an Optuna study, model selection,
paired bootstrap and paper-shaped tables.

Kedro-free (an import contract in ``pyproject.toml``): every module but two, so everything this package exports,
``trial_identity`` (a trial's content key) and ``trial_results`` (its results folder). Not Kedro-free: ``trial`` (a
trial runs the pipelines' own definitions, so it imports ``kedro.pipeline`` and the pipeline modules, no session or
catalog) and ``reproduce_pipeline`` (the ``reproduce`` node)."""

from bert_kd.sweeps.objective import check_result
from bert_kd.sweeps.paper_tables import SweepReport, build_report, markdown, write_report
from bert_kd.sweeps.scheduler import SweepOptions, collect_results, run_sweep
from bert_kd.sweeps.selection import select_best, summarize
from bert_kd.sweeps.significance import paired_bootstrap
from bert_kd.sweeps.spec import SweepSpec, TrialSpec, build_sweep, parse_restriction
from bert_kd.sweeps.storage import make_storage

__all__ = [
    "SweepReport",
    "SweepOptions",
    "SweepSpec",
    "TrialSpec",
    "build_report",
    "build_sweep",
    "check_result",
    "collect_results",
    "make_storage",
    "markdown",
    "paired_bootstrap",
    "parse_restriction",
    "run_sweep",
    "select_best",
    "summarize",
    "write_report",
]
