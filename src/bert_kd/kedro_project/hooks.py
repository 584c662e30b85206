"""Project hooks: check the environment and the run's parameters before anything trains."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kedro.framework.hooks import hook_impl

if TYPE_CHECKING:
    from bert_kd.experiment.parameters import Parameters

log = logging.getLogger(__name__)


def used_blocks(pipeline_inputs) -> set[str]:
    """Parameter blocks a pipeline reads: ``params:distill_methods.alp`` → ``distill_methods``,
    ``distill_methods.alp``; ``params:teacher.max_seq_length`` → ``teacher`` …"""
    used: set[str] = set()
    for name in pipeline_inputs:
        if name.startswith("params:"):
            parts = name[len("params:") :].split(".")
            used.update(".".join(parts[: i + 1]) for i in range(min(len(parts), 2)))
    if "params:ted" in pipeline_inputs or any(n.startswith("params:ted_methods.") for n in pipeline_inputs):
        used.add("ted_student")
    return used


def _tracking_uri(context) -> str:
    """The tracking URI kedro-mlflow is about to use: ``server.mlflow_tracking_uri`` of
    ``mlflow.yml`` (which reads ``MLFLOW_TRACKING_URI``), else the variable, else ``mlruns``."""
    import os

    from kedro.config import MissingConfigException

    loader = context.config_loader
    if "mlflow" not in loader.config_patterns:  # what kedro-mlflow adds itself
        loader.config_patterns.update({"mlflow": ["mlflow*", "mlflow*/**", "**/mlflow*"]})
    try:
        configured = ((loader["mlflow"] or {}).get("server") or {}).get("mlflow_tracking_uri")
    except MissingConfigException:
        configured = None
    return str(configured or os.environ.get("MLFLOW_TRACKING_URI") or "mlruns")


def silence_kedro_mlflow(hook_manager) -> bool:
    """Take kedro-mlflow out of this session (``tracking.enabled: false``): its hooks are
    unregistered and its ``after_context_created``, already under way, does nothing — so it
    neither opens the tracking store nor waits on an unreachable server. A hook is kedro-mlflow's when any class
    it is made of comes from the plugin (a subclass defined elsewhere included)."""
    silenced = False
    for plugin in list(hook_manager.get_plugins()):
        if not any(cls.__module__.startswith("kedro_mlflow") for cls in type(plugin).__mro__):
            continue
        for impl in hook_manager.hook.after_context_created.get_hookimpls():
            if impl.plugin is plugin:
                impl.function = lambda *args, **kwargs: None
        hook_manager.unregister(plugin)
        silenced = True
    return silenced


class PreflightHook:
    """First thing in a ``kedro run`` (before kedro-mlflow opens its store): with tracking on,
    the tracking server answers within seconds and a SQLite store is not damaged — else one
    block naming the URI or file and the fix; with ``tracking.enabled: false`` kedro-mlflow is
    taken out of the session, so nothing reaches the tracking store at all."""

    @hook_impl(tryfirst=True)
    def after_context_created(self, context) -> None:
        from bert_kd.kedro_project.preflight import check_tracking
        from bert_kd.kedro_project.quiet import quiet_third_party
        from bert_kd.tracking import is_main_process

        quiet_third_party()  # kedro-mlflow, imported by now, set its logger to INFO when it was

        tracking = (context.params or {}).get("tracking")  # not validated yet: the configuration's dict
        if isinstance(tracking, dict) and tracking.get("enabled") is False:
            if silence_kedro_mlflow(context._hook_manager):
                log.info("tracking.enabled is false: kedro-mlflow is off for this run, nothing is logged")
            return
        if is_main_process():
            from bert_kd.tracking import limit_requests

            limit_requests(_tracking_uri(context))  # MLflow's retries bounded: a server gone is named in a minute
            check_tracking(_tracking_uri(context))
            from bert_kd.tracking.runs import create_experiment_once

            # workers of a sweep starting at once on one server: kedro-mlflow would create the experiment in each
            try:
                experiment = context.config_loader["mlflow"]["tracking"]["experiment"]
            except (KeyError, TypeError, ValueError):  # no conf/*/mlflow.yml: kedro-mlflow's defaults
                experiment = {}
            create_experiment_once(
                _tracking_uri(context),
                experiment.get("name") or context._package_name,
                (experiment.get("create_experiment_kwargs") or {}).get("tags"),
            )


def typed_inputs(parameters, inputs) -> dict[str, object]:
    """The schema models (defaults filled) that stand for the ``params:`` inputs among ``inputs``:
    ``params:<block>`` → ``parameters.<block>`` and ``params:<block>.<entry>`` → its entry, where
    that is a model (or a list of models: ``multi_teachers``). Scalars, free-form dicts and the
    recipe blocks ([`RECIPE_BLOCKS`][config.schema.RECIPE_BLOCKS], whose entries nodes receive as dicts, with
    explicit weights where [`EXPLICIT_WEIGHT_BLOCKS`][bert_kd.experiment.training_jobs.student.EXPLICIT_WEIGHT_BLOCKS] says) are not listed: nodes get those as
    Kedro loads them."""
    from pydantic import BaseModel

    from bert_kd.config.schema import RECIPE_BLOCKS

    def is_model(value) -> bool:
        return isinstance(value, BaseModel) or (
            isinstance(value, list) and bool(value) and all(isinstance(v, BaseModel) for v in value)
        )

    found: dict[str, object] = {}
    for name in sorted(inputs):
        if not name.startswith("params:"):
            continue
        path = name[len("params:") :].split(".")
        if path[0] in RECIPE_BLOCKS or len(path) > 2:
            continue
        value = parameters
        for part in path:
            value = getattr(value, part, None) if isinstance(value, BaseModel) else None
        if is_model(value):
            found[name] = value
    return found


def save_entry_defaults(parameters, inputs, catalog) -> dict[str, object]:
    """Put the schema's default of every ``params:<block>.<entry>`` input the configuration leaves
    out into the catalog (``params:teacher.max_seq_length`` of a teacher block without it: 128, as
    the teacher's own tokenization uses), where Kedro would otherwise stop on a missing input."""
    from pydantic import BaseModel

    from bert_kd.config.schema import set_values

    saved = {}
    for name in sorted(inputs):
        block, _, entry = name[len("params:") :].partition(".") if name.startswith("params:") else ("", "", "")
        model = getattr(parameters, block, None) if entry and "." not in entry else None
        if isinstance(model, BaseModel) and entry in type(model).model_fields and name not in catalog:
            value = getattr(model, entry)  # a model entry (``training``) reaches nodes through before_node_run
            saved[name] = set_values(value) if isinstance(value, BaseModel) else value
            catalog[name] = saved[name]  # a new MemoryDataset (``save`` needs a registered entry)
    return saved


def check_precision(parameters) -> None:
    """``runtime.mixed_precision``, ``runtime.teacher_mixed_precision`` and ``runtime.compile`` run as said
    on this device (fp16 or CUDA graphs on a CPU do not), checked before any job is keyed: a
    [`ParameterError`][config.errors.ParameterError] listing each otherwise."""
    from bert_kd.config.errors import ParameterError
    from bert_kd.core.training.config import compile_problem, precision_problem

    runtime = parameters.runtime
    problems = [
        (f"runtime.{name}", problem)
        for name, problem in (
            ("mixed_precision", precision_problem(runtime.mixed_precision, cpu=runtime.cpu)),
            ("teacher_mixed_precision", precision_problem(runtime.teacher_mixed_precision, cpu=runtime.cpu)),
            ("compile", compile_problem(runtime.compile, cpu=runtime.cpu)),
        )
        if problem is not None
    ]
    if problems:
        raise ParameterError(problems)


def check_sweep_parameters(parameters: dict) -> None:
    """The ``reproduce`` block's table and restrictions (``reproduce.table/methods/tasks/seeds/grid``)
    parsed before anything runs: a [`SweepParameterError`][sweeps.spec.SweepParameterError] naming the bad one."""
    from bert_kd.sweeps.spec import RECIPE_NAMESPACES, build_sweep

    reproduce = parameters.get("reproduce") or {}
    build_sweep(reproduce, {namespace: parameters.get(namespace) or {} for namespace in RECIPE_NAMESPACES})
    check_results_dir(reproduce)


def check_results_dir(reproduce: dict) -> None:
    """``reproduce.results_dir`` and its table's folder in it are folders (or missing: created), never files."""
    from pathlib import Path

    from bert_kd.config.errors import ParameterError

    if not reproduce.get("results_dir"):
        return
    given = Path(reproduce["results_dir"])
    for path in (given / str(reproduce.get("table")), given, *given.parents):
        if path.exists() and not path.is_dir():
            raise ParameterError(
                [
                    (
                        "reproduce.results_dir",
                        f"{path} is a file, not a folder: the table's trial results go in a folder",
                    )
                ],
                "give a folder (created when missing), e.g. --params reproduce.results_dir=results, or move the file away",
            )


def check_run_parameters(parameters: dict, pipeline_inputs) -> Parameters:
    """What a run checks of its merged parameters (conf + ``--params``) before any node runs, for a
    pipeline with ``pipeline_inputs``: the schema, the precision on this device, the blocks the pipeline
    reads against each other and, for a sweep, its table, restrictions and storage. → the validated
    parameters; a [`UserError`][config.errors.UserError] names the first problem."""
    from bert_kd.experiment.parameters import cross_check, validate_parameters
    from bert_kd.kedro_project.preflight import check_sweep_storage

    typed = validate_parameters(parameters)
    check_precision(typed)
    used = used_blocks(pipeline_inputs)
    cross_check(typed, used)
    if "reproduce" in used:
        check_sweep_parameters(parameters)
        check_sweep_storage(parameters.get("reproduce"))
    return typed


def teacher_layer_count(model: str) -> int:
    """Transformer layers of the checkpoint ``teacher.model`` names (its config only)."""
    from transformers import AutoConfig

    from bert_kd.core.models import resolve_model_name

    return int(AutoConfig.from_pretrained(resolve_model_name(model)).num_hidden_layers)


def collapse_duplicate_rows(parameters: dict, typed, inputs, catalog) -> dict[str, str]:
    """Hand every ``distill_methods`` row of the pipeline that is the same job as another
    ([`bert_kd.core.distill.duplicates.same_jobs`][]: the same layers connected with the same weights)
    the other row's recipe, so the job is trained once and the store gives the other row the
    same student (the table shows it as "same job as <row>"). → row → the row it repeats."""
    from bert_kd.core.distill.duplicates import same_jobs

    rows = [row for row in parameters.get("distill_methods") or {} if f"params:distill_methods.{row}" in inputs]
    student = getattr(typed, "student", None)
    if len(rows) < 2 or student is None or student.model or not student.num_layers:
        return {}
    try:
        n_teacher = teacher_layer_count(typed.teacher.model)
    except Exception as exc:  # noqa: BLE001 - no config readable here: every row is trained as given
        log.debug("teacher layer count unknown (%s): rows are not checked for duplicates", exc)
        return {}
    recipes = {row: catalog.load(f"params:distill_methods.{row}") for row in rows}
    same = same_jobs(recipes, n_teacher, student.num_layers)
    for row, first in same.items():
        catalog.save(f"params:distill_methods.{row}", recipes[first])
    for first in dict.fromkeys(same.values()):
        repeats = [row for row, other in same.items() if other == first]
        log.info(
            "distill_methods: %s connect%s the same layers with the same weights as %s (a %d-layer student of a "
            "%d-layer teacher): one job, trained once, shown as 'same job as %s'",
            ", ".join(repeats),
            "" if len(repeats) > 1 else "s",
            first,
            student.num_layers,
            n_teacher,
            first,
        )
    return same


class ValidateParametersHook:
    """Validate the merged parameters (conf + ``--params``) with [`bert_kd.config.schema`][] before
    any node runs (and before the other plugins' hooks, e.g. MLflow opening a run), hand the
    nodes each recipe of [`EXPLICIT_WEIGHT_BLOCKS`][bert_kd.experiment.training_jobs.student.EXPLICIT_WEIGHT_BLOCKS] with its weights written out explicitly
    (what MLflow records), and hand
    every node the validated models (defaults filled) of its other ``params:`` inputs.

    The models reach the nodes only (``before_node_run`` returns them as the node's inputs): the
    catalog keeps the dicts of the configuration, so kedro-mlflow logs a node's parameters as it
    did before (flattened ``teacher.training.learning_rate`` …) and the other hooks read dicts."""

    def __init__(self) -> None:
        self._typed: dict[str, object] = {}

    @hook_impl(tryfirst=True)
    def before_pipeline_run(self, run_params, pipeline, catalog) -> None:
        from bert_kd.experiment.run_setup import RunCommand, record_run_command
        from bert_kd.experiment.training_jobs.student import (  # the sweep trial's expansion too
            EXPLICIT_WEIGHT_BLOCKS,
            with_explicit_weights,
        )

        self._typed = {}
        record_run_command(RunCommand.of(run_params.get("env"), run_params.get("runtime_params")))
        from bert_kd.kedro_project.run_params import apply_glue_dir_precedence

        apply_glue_dir_precedence(run_params, catalog)
        parameters = catalog.load("parameters")
        inputs = pipeline.inputs()
        typed = check_run_parameters(parameters, inputs)
        for name in sorted(inputs):
            block, _, entry = name[len("params:") :].partition(".")
            if name.startswith("params:") and block in EXPLICIT_WEIGHT_BLOCKS and entry and "." not in entry:
                catalog.save(name, with_explicit_weights(catalog.load(name)))
        collapse_duplicate_rows(parameters, typed, inputs, catalog)
        self._typed = typed_inputs(typed, inputs)
        save_entry_defaults(typed, inputs, catalog)

    @hook_impl
    def before_node_run(self, node, inputs) -> dict[str, object] | None:
        """The node's ``params:`` inputs as validated models (a copy each: a node may not change
        what the next one reads); kedro-mlflow, in the same call, still sees the catalog's dicts."""
        from bert_kd.config.errors import RUNNING_TRAINING_BLOCKS

        models = {name: self._typed[name] for name in inputs if name in self._typed}
        RUNNING_TRAINING_BLOCKS.set(training_blocks(models))
        return {name: _copy(value) for name, value in models.items()} or None


def training_blocks(models: dict[str, object]) -> dict[str, float]:
    """``{parameter path: learning rate}`` of every ``training`` block inside a node's ``params:``
    models (``teacher.training``, ``multi_teachers[1].training``, ``ted.filters.training``); a block
    without its own learning rate trains with the schema's default."""
    from pydantic import BaseModel

    from bert_kd.config.schema import Training

    found: dict[str, float] = {}

    def walk(value, path: str) -> None:
        if isinstance(value, Training):
            found[path] = value.learning_rate
        elif isinstance(value, BaseModel):
            for name in type(value).model_fields:
                walk(getattr(value, name), f"{path}.{name}")
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, f"{path}[{i}]")

    for name, model in models.items():
        walk(model, name[len("params:") :])
    return found


def _copy(value):
    return [v.model_copy(deep=True) for v in value] if isinstance(value, list) else value.model_copy(deep=True)


# ---------------------------------------------------------------- the terminal's last lines
#: Where the comparison tables of ``{name}_table_md`` are written (conf/base/catalog.yml).
REPORT_FOLDER = "data/08_reporting"


def closing_summary(
    pipeline: str,
    tables: dict[str, tuple[str, str]],
    evaluations: list[dict],
    registrations: dict[str, dict],
    parent_url: str | None,
) -> str:
    """The lines a ``kedro run`` ends with: each comparison table (``tables``: name → (markdown,
    the file it is written to)) or, without one, each job's dev metric with how it stands against the
    majority class (a warning at or below it) and its rows cut at the max length; the MLflow link to the
    ``kedro run``'s run; what was registered (a tie: each tied row's version and the command that
    can decide it)."""
    from bert_kd.core.reports.verdict import tied_alias
    from bert_kd.experiment.tracker import CHAMPION_ALIAS

    lines = [f"── {pipeline} finished ──"]
    for markdown, path in tables.values():
        lines += [markdown.rstrip(), f"table: {path}"]
    if tables:  # the table has the majority-class row; the cut rows are the same for every row of it
        from bert_kd.experiment.floor import floor_of

        cut = next((line for e in evaluations if (f := floor_of(e)) and (line := f.cut_line())), None)
        lines += [cut] if cut else []
    if not tables:
        for evaluation in evaluations:
            info = evaluation.get("info") or {}
            who = (
                info.get("method")
                or info.get("configuration")
                or info.get("role")
                or evaluation.get("model")
                or "model"
            )
            metric, score = evaluation.get("primary_metric"), evaluation.get("score")
            if metric and score is not None:
                reused = " (reused)" if info.get("reused") else ""
                lines.append(
                    f"{who}{reused}: dev {metric} = {float(score):.4f} ({evaluation.get('task', '?')}, "
                    f"{evaluation.get('score_examples', '?')} rows)"
                )
                lines += [f"  {line}" for line in floor_lines(who, evaluation)]
    if parent_url:
        lines.append(f"MLflow run: {parent_url}")
    for name, registration in registrations.items():
        if registration.get("versions"):  # a tie: each tied row under its own alias, no champion
            tied = ", ".join(
                f"{row} as {uri} = models:/{registration['name']}@{tied_alias(row)}"
                for row, uri in registration["versions"].items()
            )
            lines.append(f"registered, tied (no @{CHAMPION_ALIAS}): {tied}")
        elif registration.get("registered"):
            alias = registration.get("alias")
            also = f" = models:/{registration['name']}@{alias}" if alias else ""
            lines.append(f"registered: {registration['method']} as {registration['uri']}{also}")
        else:
            lines.append(f"not registered ({name}): {registration.get('reason')}")
        if registration.get("decide"):
            lines.append(f"to decide the tie: {registration['decide']}")
    return "\n".join(lines)


def floor_lines(who: str, evaluation: dict) -> list[str]:
    """How ``evaluation``'s score stands against the majority class and how many of its rows were cut at the
    max length ([`bert_kd.experiment.floor.Floor`][]); a score at or below the floor is also logged as a warning."""
    from bert_kd.experiment.floor import floor_of

    floor = floor_of(evaluation)
    if floor is None:
        return []
    if floor.at_or_below:
        log.warning("%s (%s): %s", who, evaluation.get("task", "?"), floor.standing().removeprefix("WARNING: "))
    return floor.lines()


def _written_to(catalog, dataset: str, base: str) -> str:
    """The file a catalog entry writes (its ``filepath``), else the comparison tables' folder."""
    try:
        path = getattr(catalog.get(dataset), "_filepath", None)
    except Exception:  # noqa: BLE001 - a catalog without that entry or ``get``: the usual place
        path = None
    return str(path) if path else f"{REPORT_FOLDER}/{base[: -len('_table_md')]}.md"


class ClosingSummaryHook:
    """Print [`closing_summary`][] after everything else of a ``kedro run`` (a hook wrapper
    around ``after_pipeline_run``): plain lines, never wrapped, so a log file ends with the answer."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.tables: dict[str, tuple[str, str]] = {}
        self.evaluations: list[dict] = []
        self.registrations: dict[str, dict] = {}
        self.parent_url: str | None = None

    @hook_impl
    def before_pipeline_run(self, run_params, pipeline, catalog) -> None:
        self._reset()
        try:
            from bert_kd.tracking import active_run, run_url
        except ImportError:  # pragma: no cover
            return
        active = active_run()
        if active is not None:
            self.parent_url = run_url(active.info.experiment_id, active.info.run_id)

    @hook_impl
    def after_node_run(self, node, outputs, catalog) -> None:
        for name, value in (outputs or {}).items():
            base = name.rsplit(".", 1)[-1]
            if base.endswith("_table_md") and isinstance(value, str):
                self.tables[base[: -len("_table_md")]] = (value, _written_to(catalog, name, base))
            elif base.endswith("_registered_model") and isinstance(value, dict):
                self.registrations[base[: -len("_registered_model")]] = value
            elif isinstance(value, dict) and "primary_metric" in value and "score" in value:
                self.evaluations.append(value)

    @hook_impl(hookwrapper=True)
    def after_pipeline_run(self, run_params, pipeline, catalog):
        yield
        names = run_params.get("pipeline_names") or run_params.get("pipeline_name") or ["__default__"]
        name = "+".join([names] if isinstance(names, str) else names)
        print(
            "\n" + closing_summary(name, self.tables, self.evaluations, self.registrations, self.parent_url), flush=True
        )
