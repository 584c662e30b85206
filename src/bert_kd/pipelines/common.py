"""What the Kedro nodes share that is Kedro: the ``run_settings`` node and the wrapper handing a
node its run-wide parameters ([`settings_node`][]), and kedro-viz tags.

Nodes import the Kedro-free helpers they call from the modules that define them
([`bert_kd.experiment.run_setup`][], [`bert_kd.experiment.store`][], [`bert_kd.experiment.evaluation`][]);
this module re-exports none of them.
"""

from __future__ import annotations

import functools
import inspect
from typing import Mapping

from kedro.pipeline import Pipeline, node

from bert_kd.config.schema import Block, Runtime, Tracking, typed
from bert_kd.experiment.run_setup import DATA_SOURCE, RunSettings
from bert_kd.pipelines.wrapping import located_at

# ---------------------------------------------------------------- run-wide settings as one input
#: Parameters every run shares. Nodes read them from the one ``run_settings`` dataset, so the DAG
#: shows one input instead of ``task``, ``seed``, ``tracking``, ``runtime`` fanned out to every
#: node; users still set them by their own names (``--params task=rte``).
RUN_PARAMETERS = ("task", "seed", "tracking", "runtime", "glue_dir", "max_train_samples", "max_eval_samples")
#: The run parameters saying where the rows come from (one ``data_source`` dict in the run settings).
DATA_SOURCE_PARAMETERS = ("glue_dir", "max_train_samples", "max_eval_samples")
#: A node function's argument that receives the run settings as one [`RunSettings`][].
WHOLE_RUN_SETTINGS = "run"


def gather_data_source(glue_dir, max_train_samples, max_eval_samples) -> dict:
    """Where the rows come from (``glue_dir`` and the sample caps) as one ``data_source`` dict,
    recorded on MLflow runs (``tracking.log_training_job``), never part of a key."""
    return {"glue_dir": glue_dir, "max_train_samples": max_train_samples, "max_eval_samples": max_eval_samples}


def build_run_settings(
    task: str,
    seed: int,
    tracking: Block[Tracking] | None,
    runtime: Block[Runtime] | None,
    data_source: Mapping | None = None,
) -> dict:
    """The run-wide parameters as one dict, ``tracking`` and ``runtime`` as schema models (the
    hook's, or validated here from a notebook's dicts); ``data_source`` ([`gather_data_source`][])
    groups where the rows came from (a key left out: None) and its entries are also there by their own names."""
    unknown = sorted(set(data_source or {}) - set(DATA_SOURCE_PARAMETERS))
    if unknown:
        raise ValueError(f"data_source has unknown key(s) {unknown}; valid: {list(DATA_SOURCE_PARAMETERS)}")
    data = gather_data_source(**{key: (data_source or {}).get(key) for key in DATA_SOURCE_PARAMETERS})
    return {
        "task": task,
        "seed": seed,
        "tracking": typed(Tracking, tracking, "tracking"),
        "runtime": typed(Runtime, runtime, "runtime"),
        **data,
        DATA_SOURCE: data,
    }


#: kedro-viz's groups of the shared start of every pipeline (node names ``data.ingest_glue``,
#: ``teacher.train_teacher``; datasets keep their names): collapsed, ``distill_baselines`` opens readable.
DATA_GROUP, TEACHER_GROUP = "data", "teacher"


def grouped(pipeline: Pipeline, group: str) -> Pipeline:
    """``pipeline``'s nodes in kedro-viz's group ``group`` (their names prefixed, their datasets not)."""
    return Pipeline(pipeline, namespace=group, prefix_datasets_with_namespace=False)


def run_settings_node() -> Pipeline:
    """The nodes making the ``run_settings`` dataset: the data source, then all run settings (group ``data``)."""
    return grouped(_run_settings_nodes(), DATA_GROUP)


def _run_settings_nodes() -> Pipeline:
    return Pipeline(
        [
            node(
                gather_data_source,
                [f"params:{p}" for p in DATA_SOURCE_PARAMETERS],
                DATA_SOURCE,
                name="gather_data_source",
                tags=tags_for(role="data"),
            ),
            node(
                build_run_settings,
                [*(f"params:{p}" for p in RUN_PARAMETERS if p not in DATA_SOURCE_PARAMETERS), DATA_SOURCE],
                "run_settings",
                name="build_run_settings",
                tags=tags_for(role="data"),
            ),
        ]
    )


def reads_run_settings(func, **fixed):
    """``func`` as a node function whose arguments named like a run setting (``task``, ``seed``,
    ``tracking``, ``runtime``, ``glue_dir``, ``max_*_samples``, ``data_source``) come from the
    last input, ``run_settings``, and an argument named ``run`` gets all of them as one
    [`RunSettings`][]; the others are the node's inputs in order; ``fixed`` keyword
    arguments are bound when the pipeline is built (e.g. ``row="alp_no"``).

    ``func`` itself keeps its plain signature (notebooks and tests call it directly).
    """
    names = (*RUN_PARAMETERS, DATA_SOURCE, WHOLE_RUN_SETTINGS)
    parameters = list(inspect.signature(func).parameters.values())
    from_settings = [p.name for p in parameters if p.name in names]
    own = [
        p
        for p in parameters
        if p.name not in names
        and p.name not in fixed
        and p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if not from_settings:
        raise ValueError(f"{func.__qualname__} takes none of the run settings {names}")

    def call(*args):
        return _call_with_run_settings(func, own, from_settings, fixed, args)

    functools.update_wrapper(call, func)  # name, docstring and source shown by kedro-viz are func's
    call.__signature__ = inspect.Signature(
        [p.replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in own]
        + [inspect.Parameter("run_settings", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    )
    return located_at(call, func)


def _call_with_run_settings(func, own, from_settings, fixed, args):
    """The body of a [`reads_run_settings`][] node function."""
    *values, settings = args
    kwargs = {p.name: v for p, v in zip(own, values)}
    kwargs.update(
        {name: RunSettings.of(settings) if name == WHOLE_RUN_SETTINGS else settings[name] for name in from_settings}
    )
    return func(**kwargs, **fixed)


def with_fixed(func, **fixed):
    """``func`` with the keyword arguments ``fixed`` bound (``row="alp_no"``, ``slot=1``), as a plain
    function that kedro-viz shows as ``func``: its name, its code and its file (a ``functools.partial``
    has no file, so kedro-viz showed none)."""
    parameters = [p for name, p in inspect.signature(func).parameters.items() if name not in fixed]

    def call(*args, **kwargs):
        return func(*args, **kwargs, **fixed)

    functools.update_wrapper(call, func)
    call.__signature__ = inspect.Signature(parameters)
    return located_at(call, func)


def settings_node(func, inputs, outputs, *, name: str, tags=None, namespace: str | None = None, fixed=None):
    """``node(func, [*inputs, "run_settings"], …)`` with [`reads_run_settings`][] (``fixed``: bound keywords)."""
    inputs = [inputs] if isinstance(inputs, str) else list(inputs)
    return node(
        reads_run_settings(func, **(fixed or {})),
        [*inputs, "run_settings"],
        outputs,
        name=name,
        tags=tags,
        namespace=namespace,
    )


def tags_for(paper: str | None = None, method: str | None = None, role: str | None = None) -> list[str]:
    """kedro-viz filter tags: ``paper_alp_kd``, ``method_alp_no``, ``role_student`` (Kedro allows ``[\\w.-]``).

    kedro-viz shows a tag with ``_``/``-`` as spaces and each word capitalised ("Method Alp No"), so a
    tag is words joined by ``_``: a ``.`` would survive as "Method.alp No"."""
    return [f"{kind}_{value}" for kind, value in (("paper", paper), ("method", method), ("role", role)) if value]
