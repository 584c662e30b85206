"""Nodes of multi-teacher distillation: K teachers (own tokenizers) → one student."""

from __future__ import annotations

import logging
import re
from functools import partial

import pandas as pd

from bert_kd import jobs
from bert_kd.data.glue import get_task
from bert_kd.data.tokenize import TOKEN_COLUMNS, merge_tokenized, tokenize_splits
from bert_kd.distill.figures import unavailable_figure
from bert_kd.distill.methods import build_method
from bert_kd.distill.methods.multi_teacher.contributions import contributions_figure, contributions_table, dev_contributions
from bert_kd.distill.methods.multi_teacher.one_to_many import MultiTeacherOneToMany
from bert_kd.distill.objective import DistillationObjective, Teacher
from bert_kd.models import ModelBundle, count_parameters, init_key_material
from bert_kd.pipelines import common
from bert_kd.pipelines.data_processing.nodes import split_frames
from bert_kd.pipelines.distill.nodes import (
    cache_teacher_outputs,
    check_teacher,
    majority_row,
    markdown_table,
    register_best_student,
    shallow_student,
    table_verdict,
    with_verdict,
)
from bert_kd.plots import comparison_bars, comparison_title
from bert_kd.tracking import log_comparison_to_parent
from bert_kd.training import fit, make_loader
from bert_kd.verdict import MAJORITY_METHOD

log = logging.getLogger(__name__)


TEACHER_COLUMN = re.compile(r"^t\d+_")


def teacher_prefix(k: int) -> str:
    return f"t{k}_"


def _teacher_list(teachers: list[dict]) -> list[dict]:
    if not teachers:
        raise ValueError("multi_teachers is empty: list at least one teacher (model, seed, …)")
    names = [t.get("name", f"teacher{k}") for k, t in enumerate(teachers)]
    if len(set(names)) != len(names):
        raise ValueError(f"multi_teachers names must be unique, got {names}")
    return [{"name": n, **t} for n, t in zip(names, teachers)]


def select_teacher(teachers: list[dict], slot: int) -> dict:
    """Entry ``slot`` of ``multi_teachers`` as a ``teacher`` parameter block."""
    specs = _teacher_list(teachers)
    if slot >= len(specs):
        raise ValueError(f"parameter multi_teachers lists {len(specs)} teachers, but the pipeline has a block for "
                         f"teacher {slot}: run with {slot + 1} or more teachers, or set multi_teachers in conf/ "
                         "(the number of teacher blocks is read from the configuration)")
    return {k: v for k, v in specs[slot].items() if k != "name"}


def gather_teachers(teachers: list[dict], *bundles: ModelBundle) -> list[ModelBundle]:
    """The trained teachers in ``multi_teachers`` order, each named."""
    specs = _teacher_list(teachers)
    if len(specs) != len(bundles):
        raise ValueError(f"parameter multi_teachers lists {len(specs)} teachers, but the pipeline was built with "
                         f"{len(bundles)} teacher blocks (the count is read from the configuration files)")
    for spec, bundle in zip(specs, bundles):
        bundle.info["name"] = spec["name"]
    return list(bundles)


def evaluate_multi_teachers(bundles: list[ModelBundle], train, validation, teachers: list[dict], task: str,
                            tracking: dict) -> list[dict]:
    """Evaluate each teacher on its own tokenization of the dev set(s)."""
    results = []
    for bundle, spec in zip(bundles, _teacher_list(teachers)):
        tokenized = tokenize_splits(split_frames(train.head(1), validation), bundle.tokenizer, int(spec["max_seq_length"]))
        evaluation = common.evaluate_bundle(bundle, tokenized, task)
        evaluation["name"] = spec["name"]
        common.log_evaluation(evaluation, bundle.info.get("mlflow_run_id"), tracking)
        results.append(evaluation)
    return results


def prepare_multi_teacher_data(bundles: list[ModelBundle], train, validation, teachers: list[dict], student: dict):
    """The student's tokenization plus every teacher's own under prefix ``t<k>_``."""
    specs = _teacher_list(teachers)
    init = int(student.get("init_from_teacher", 0))
    frames = split_frames(train, validation)
    max_length = int(student.get("max_seq_length", specs[init]["max_seq_length"]))
    own = tokenize_splits(frames, bundles[init].tokenizer, max_length, with_offsets=True)
    others = {  # character offsets → shared-span ids for teachers whose tokens differ (MT alignment: token)
        teacher_prefix(k): tokenize_splits(frames, bundle.tokenizer, int(spec["max_seq_length"]), with_offsets=True)
        for k, (bundle, spec) in enumerate(zip(bundles, specs))
    }
    return merge_tokenized(own, others)


def cache_multi_teacher_outputs(bundles: list[ModelBundle], data, cache: dict, runtime: dict | None = None) -> list:
    """One logits/[CLS] cache per teacher, each over its own tokenization."""
    caches = []
    for k, bundle in enumerate(bundles):
        prefix = teacher_prefix(k)
        view = {split: _unprefixed(data[split], prefix) for split in data}
        caches.append(cache_teacher_outputs(bundle, view, cache, runtime))
    return caches


def _unprefixed(dataset, prefix: str):
    """A view of ``dataset`` where teacher ``prefix``'s token columns are the main ones (its
    span-id columns, which depend on the student's tokenizer, left out)."""
    keep = ["idx", "labels"] + [prefix + c for c in TOKEN_COLUMNS if prefix + c in dataset.column_names]
    view = dataset.select_columns(keep)
    return view.rename_columns({c: c[len(prefix):] for c in keep if c.startswith(prefix)})


def distill_multi_teacher(bundles: list[ModelBundle], data, caches: list, config: dict, student: dict, task: str,
                          seed: int, tracking: dict, runtime: dict, data_source: dict | None = None) -> ModelBundle:
    """Distil the chosen teachers (``teachers: [indices]``, default all) into a fresh student
    (``data_source``: glue_dir and sample caps, recorded on the MLflow run)."""
    spec = get_task(task)
    config = dict(config)
    chosen = config.pop("teachers", None) or list(range(len(bundles)))
    if any(not 0 <= k < len(bundles) for k in chosen):
        raise ValueError(f"teachers {chosen} must index multi_teachers (0..{len(bundles) - 1})")
    for k in chosen:
        check_teacher(bundles[k], task)
    init = int(student.get("init_from_teacher", 0))
    names = [bundles[k].info.get("name", f"t{k}") for k in chosen]
    train_cfg = common.training_config(student.get("training"), runtime, seed, spec.name, None)
    job = common.job("multi_teacher_student", {
        "task": spec.name, "recipe": config, "chosen": chosen, "teachers": [b.info.get("key") for b in bundles],
        "student": init_key_material({k: v for k, v in student.items() if k != "training"}), "training": jobs.training_spec(vars(train_cfg)),
        "seed": seed, "data": jobs.dataset_fingerprint(data),
    })
    train = partial(_distill_from_teachers, bundles=bundles, data=data, caches=caches, config=config, student=student,
                    chosen=chosen, names=names, init=init, spec=spec, seed=seed, tracking=tracking, runtime=runtime, job=job,
                    data_source=data_source or {}, run_name=f"distill_multi_teacher:{config['method']}[{','.join(names)}]:{spec.name}")
    return common.run_model_job(job, train, tracking, recompute=common.recompute(runtime))


def _distill_from_teachers(checkpoint_dir, *, bundles, data, caches, config, student, chosen, names, init, spec, seed,
                           tracking, runtime, job, run_name, data_source) -> ModelBundle:
    """Build the student from teacher ``init``, distil the ``chosen`` teachers into it and record the run."""
    name = config["method"]
    model, kept = shallow_student(bundles[init], student, spec.name)
    teachers = [Teacher(bundles[k].model, teacher_prefix(k), caches[k] if caches else None, names[i]) for i, k in enumerate(chosen)]
    method = build_method(config, model, [t.model for t in teachers], regression=spec.is_regression)
    objective = DistillationObjective(model, teachers, method, method.weights)
    settings = common.training_config(student.get("training"), runtime, seed, spec.name, checkpoint_dir,
                                      n_train=len(data["train"]))
    collator = common.collator_for(bundles[init].tokenizer, {teacher_prefix(k): b.tokenizer for k, b in enumerate(bundles)})
    with common.tracked_run(run_name, common.tracking_enabled(tracking), {"role": "student", "method": name, "task": spec.name}) as run:
        common.log_job_columns(run, job, spec.name, seed, data_source, len(data["train"]), model, method=method)
        run.log_params({"teachers": names, "weights": method.weights,
                        "temperature": method.temperature, "config": config, "student": student,
                        "student_parameters": count_parameters(model), "training": vars(settings), "key": job.key,
                        "teacher_cache": [objective.uses_cache(k) for k in range(len(teachers))]})
        run.log_dict(method.alignment_report(), "alignment_before.json")
        common.log_gradient_shares(run, objective, data["train"], collator, settings, tracking, run_name)
        result = fit(objective, data["train"], data[common.evaluation_split(data)], settings, collator=collator,
                     evaluate_fn=common.evaluate_fn(spec.name), log_fn=common.step_logger(run), description=f"{name} {spec.name}")
        report = method.alignment_report()
        if report:
            run.log_dict(report, "alignment.json")
        run.log_metrics(method.alignment_metrics())
        contributions = None
        if isinstance(method, MultiTeacherOneToMany):  # per-teacher / per-group loss shares on dev (issue 11)
            split = common.evaluation_split(data)
            contributions = dev_contributions(objective, make_loader(data[split], settings.eval_batch_size, collator, shuffle=False))
            contributions["split"] = split
            run.log_dict(contributions, "contributions.json")
    return ModelBundle(model, bundles[init].tokenizer, {
        "role": "student", "method": name, "configuration": run_name, "teachers": names, "task": spec.name, "key": job.key,
        "best_epoch": result.best_epoch, "best_metrics": result.best_metrics, "history": result.history,
        "alignment": report, "mlflow_run_id": run.run_id, "initialised_from_teacher_layers": kept,
        "contributions": contributions,
    })


def evaluate_multi_student(bundle: ModelBundle, data, task: str, tracking: dict) -> dict:
    """Student metrics on its own tokenization (teacher columns ignored)."""
    view = {split: data[split].select_columns([c for c in data[split].column_names if not TEACHER_COLUMN.match(c)])
            for split in data}
    evaluation = common.evaluate_bundle(bundle, view, task)
    common.log_evaluation(evaluation, bundle.info.get("mlflow_run_id"), tracking)
    return evaluation


def compare_multi_teacher(teacher_metrics: list[dict], *students: dict):
    """Tables 2 (by teachers) and 3 (by strategy) of the paper, plus a bar chart."""
    best_teacher = max(teacher_metrics, key=lambda e: e["score"])
    rows = [{"configuration": f"teacher {e['name']}", "method": "teacher", "teachers": e["name"],
             e["primary_metric"]: round(e["score"], 4), "% of best teacher": round(100 * e["score"] / best_teacher["score"], 1)}
            for e in teacher_metrics]
    for e in students:
        info = e["info"]
        rows.append({"configuration": info.get("configuration"), "method": info.get("method"),
                     "teachers": "+".join(info.get("teachers", [])), e["primary_metric"]: round(e["score"], 4),
                     "% of best teacher": round(100 * e["score"] / best_teacher["score"], 1)})
    student_rows = rows[len(teacher_metrics):]
    majority = majority_row(best_teacher, students, kept_column="% of best teacher")
    if majority:  # the floor: only the columns of this table
        rows.insert(len(teacher_metrics), {"configuration": MAJORITY_METHOD, "method": MAJORITY_METHOD, "teachers": "",
                                           **{k: majority[k] for k in (best_teacher["primary_metric"], "% of best teacher")}})
    table = pd.DataFrame(rows)
    metric = best_teacher["primary_metric"]
    by_teachers = table[table["method"].isin(["teacher", MAJORITY_METHOD, "multi_teacher"])]
    by_strategy = table[table["method"] != "teacher"]
    verdict = table_verdict(student_rows, majority, metric, best_teacher, label=lambda r: f"{r['method']}[{r['teachers']}]")
    body = "## Table 2: by teachers\n\n" + markdown_table(by_teachers) + "\n## Table 3: by strategy\n\n" + markdown_table(by_strategy)
    title = comparison_title("distill_multi_teacher_baselines (Tables 2–3)", best_teacher["task"], metric)
    markdown = with_verdict(body, verdict, title)
    students_only = table[~table["method"].isin(["teacher", MAJORITY_METHOD])]
    figure = comparison_bars([f"{m}\n{t}" for m, t in zip(students_only["method"], students_only["teachers"])],
                             list(students_only[metric]), best_teacher["score"], metric,
                             comparison_title("distill_multi_teacher_baselines", best_teacher["task"], metric))
    common.log_to_active_run({"multi_teacher_comparison.md": markdown}, {"multi_teacher_comparison.png": figure})
    log_comparison_to_parent(table, metric, markdown=body, title=title, warning=verdict.warning,
                             teacher_run_id=best_teacher.get("info", {}).get("mlflow_run_id"))
    return table, markdown, figure


def register_best_multi_student(table: pd.DataFrame, teacher_metrics: list[dict], *students_and_settings) -> dict:
    """:func:`~bert_kd.pipelines.distill.nodes.register_best_student` for Tables 2–3 (rows named
    ``<method>[<teachers>]``; the best teacher is the reference); the last input is ``run_settings``."""
    *students, settings = students_and_settings
    tracking, task = settings["tracking"], settings["task"]
    best_teacher = max(teacher_metrics, key=lambda e: e["score"])
    return register_best_student(table, best_teacher, tracking, task, *students,
                                 table_name="distill_multi_teacher_baselines",
                                 label=lambda info: f"{info.get('method')}[{'+'.join(info.get('teachers', []))}]")


def multi_teacher_contributions(student: ModelBundle, task: str):
    """Each teacher's and each layer group's share of the MT loss on dev at the end of training
    (:mod:`bert_kd.distill.methods.multi_teacher.contributions`, recorded by the distillation
    job in ``info["contributions"]``). → (CSV table, figure)."""
    contributions = student.info.get("contributions")
    configuration = student.info.get("configuration", student.info.get("method", "?"))
    title = f"Multi-teacher: loss share per teacher and layer group ({configuration})"
    if not contributions:
        reason = (f"the student of {configuration} has no recorded contributions (method "
                  f"{student.info.get('method')!r}: only 'multi_teacher' records them; a model stored by an older "
                  "bert-kd: rerun with runtime.recompute: true)")
        log.warning("multi-teacher contributions not drawn: %s", reason)
        table, figure = pd.DataFrame([{"not_drawn": reason}]), unavailable_figure(title, reason)
    else:
        table = contributions_table(contributions)
        figure = contributions_figure(table, f"{title}\n{get_task(task).name} {contributions.get('split', 'dev')}, "
                                             f"{contributions['examples']} examples, total loss {contributions['total']:.4f}")
    common.log_to_active_run({"figures/multi_teacher_contributions.csv": table.to_csv(index=False)},
                             {"figures/multi_teacher_contributions.png": figure})
    return table, figure
