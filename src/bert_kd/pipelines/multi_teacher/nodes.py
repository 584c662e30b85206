"""Nodes of multi-teacher distillation: K teachers (own tokenizers) → one student."""

from __future__ import annotations

import logging
import re

import pandas as pd

from bert_kd.config.schema import MultiStudent, MultiTeacher, set_values, typed
from bert_kd.core.data.glue import get_task
from bert_kd.core.data.tokenize import TOKEN_COLUMNS, merge_tokenized, tokenize_splits
from bert_kd.core.distill.alp_figures import unavailable_figure
from bert_kd.core.distill.methods import method_key_material
from bert_kd.core.distill.methods.multi_teacher.contributions import contributions_figure, contributions_table
from bert_kd.core.distill.methods.multi_teacher.spans import span_attention_key_material
from bert_kd.core.distill.objective import Teacher
from bert_kd.core.distill.outputs import summary_key_material
from bert_kd.core.models import ModelBundle, init_key_material
from bert_kd.core.reports.markdown_tables import markdown_table
from bert_kd.core.reports.plots import comparison_bars, comparison_title
from bert_kd.core.reports.verdict import MAJORITY_METHOD, tied_name
from bert_kd.experiment import jobs
from bert_kd.experiment import store as model_store
from bert_kd.experiment.comparison import display_frame, majority_row, sort_score, table_verdict, with_verdict
from bert_kd.experiment.evaluation import evaluate_bundle
from bert_kd.experiment.lineage import Lineage
from bert_kd.experiment.run_setup import training_config
from bert_kd.experiment.tracker import Comparison, kedro_run, tracker_for
from bert_kd.experiment.training_jobs.student import (
    DistillJob,
    RunSettings,
    check_teacher,
    shallow_student,
    staged_selection,
    task_of,
    train_student,
    with_explicit_weights,
)
from bert_kd.pipelines.data_processing.nodes import split_frames
from bert_kd.pipelines.distill.nodes import cache_teacher_outputs
from bert_kd.pipelines.registration import register_best_student

log = logging.getLogger(__name__)


TEACHER_COLUMN = re.compile(r"^t\d+_")


def teacher_prefix(k: int) -> str:
    return f"t{k}_"


def teacher_entries(teachers) -> list[MultiTeacher]:
    """The ``multi_teachers`` entries as typed blocks (an entry without ``name`` is ``teacher<k>``;
    schema defaults, e.g. ``max_seq_length`` 128, filled in); names must be unique."""
    if not teachers:
        raise ValueError("multi_teachers is empty: list at least one teacher (model, seed, …)")
    entries = [
        typed(MultiTeacher, {"name": f"teacher{k}", **set_values(t)}, f"multi_teachers[{k}]")
        for k, t in enumerate(teachers)
    ]
    names = [entry.name for entry in entries]
    if len(set(names)) != len(names):
        raise ValueError(f"multi_teachers names must be unique, got {names}")
    return entries


def select_teacher(teachers, slot: int) -> dict:
    """Entry ``slot`` of ``multi_teachers`` as a ``teacher`` parameter block: the entry as written
    (no ``name``) with its typed ``max_seq_length`` (schema default 128 when the entry sets none).
    Nothing comes from the main ``teacher`` block: the pipeline and a sweep trial read the same."""
    entries = teacher_entries(teachers)
    if slot >= len(entries):
        raise ValueError(
            f"parameter multi_teachers lists {len(entries)} teachers, but the pipeline has a block for "
            f"teacher {slot}: run with {slot + 1} or more teachers, or set multi_teachers in conf/ "
            "(the number of teacher blocks is read from the configuration)"
        )
    block = {k: v for k, v in set_values(teachers[slot]).items() if k != "name"}
    return {**block, "max_seq_length": entries[slot].max_seq_length}


def gather_teachers(teachers, *bundles: ModelBundle) -> list[ModelBundle]:
    """The trained teachers in ``multi_teachers`` order, each named."""
    entries = teacher_entries(teachers)
    if len(entries) != len(bundles):
        raise ValueError(
            f"parameter multi_teachers lists {len(entries)} teachers, but the pipeline was built with "
            f"{len(bundles)} teacher blocks (the count is read from the configuration files)"
        )
    for entry, bundle in zip(entries, bundles):
        bundle.info["name"] = entry.name
    return list(bundles)


def evaluate_multi_teachers(
    bundles: list[ModelBundle], train, validation, teachers, task: str, tracking: dict
) -> list[dict]:
    """Evaluate each teacher on its own tokenization of the dev set(s)."""
    results = []
    for bundle, entry in zip(bundles, teacher_entries(teachers)):
        tokenized = tokenize_splits(split_frames(train.head(1), validation), bundle.tokenizer, entry.max_seq_length)
        evaluation = evaluate_bundle(bundle, tokenized, task)
        evaluation["name"] = entry.name
        tracker_for(tracking).log_evaluation(Lineage.of(bundle.info).run_id, evaluation)
        results.append(evaluation)
    return results


def prepare_multi_teacher_data(bundles: list[ModelBundle], train, validation, teachers, student):
    """The student's tokenization (teacher ``init_from_teacher``'s tokenizer and ``max_seq_length``)
    plus every teacher's own under prefix ``t<k>_``."""
    entries = teacher_entries(teachers)
    init = typed(MultiStudent, student, "multi_student").init_from_teacher
    frames = split_frames(train, validation)
    own = tokenize_splits(frames, bundles[init].tokenizer, entries[init].max_seq_length, with_offsets=True)
    others = {  # character offsets → shared-span ids for teachers whose tokens differ (MT alignment: token)
        teacher_prefix(k): tokenize_splits(frames, bundle.tokenizer, entry.max_seq_length, with_offsets=True)
        for k, (bundle, entry) in enumerate(zip(bundles, entries))
    }
    return merge_tokenized(own, others)


def cache_multi_teacher_outputs(bundles: list[ModelBundle], data, cache, runtime=None) -> list:
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
    return view.rename_columns({c: c[len(prefix) :] for c in keep if c.startswith(prefix)})


def student_recipe(config) -> tuple[dict, dict]:
    """A ``multi_teacher_configs`` entry, without its ``teachers`` choice, as (key material, what the
    method is built from): the student is keyed on the recipe as written (the key of every stored
    multi-teacher student, a sweep trial's as a ``kedro run``'s), the method receives its weights
    written out ([`with_explicit_weights`][]: Shi & Guo Eq. 12–13 expanded,
    what MLflow records)."""
    written = {k: v for k, v in set_values(config).items() if k != "teachers"}
    return written, with_explicit_weights(written)


def distill_multi_teacher(bundles: list[ModelBundle], data, caches: list, config, student, settings) -> ModelBundle:
    """Distil the chosen teachers (``teachers: [indices]``, default all) into a fresh student built
    from teacher ``init_from_teacher``'s layers, through the one distillation body
    ([`bert_kd.experiment.training_jobs.student.train_student`][]); ``settings``: the run settings."""
    run = RunSettings.of(settings)
    spec = get_task(run.task)
    written, recipe = student_recipe(config)
    chosen = set_values(config).get("teachers") or list(range(len(bundles)))
    if any(not 0 <= k < len(bundles) for k in chosen):
        raise ValueError(f"teachers {chosen} must index multi_teachers (0..{len(bundles) - 1})")
    for k in chosen:
        check_teacher(bundles[k], run.task)
    params = typed(MultiStudent, student, "multi_student")
    block = set_values(student)
    init = params.init_from_teacher
    names = [bundles[k].info.get("name", f"t{k}") for k in chosen]
    training = training_config(params.training, run.runtime, run.seed, spec.name, None)
    store = model_store.job(
        "multi_teacher_student",
        {
            "task": spec.name,
            "recipe": written,
            "chosen": chosen,
            "teachers": [Lineage.of(b.info).key for b in bundles],
            "student": init_key_material({k: v for k, v in block.items() if k != "training"}),
            "training": jobs.training_spec(vars(training)),
            "seed": run.seed,
            "data": jobs.dataset_fingerprint(data),
            **summary_key_material(*(bundles[k].model for k in chosen), bundles[init].model),
            **span_attention_key_material(*(bundles[k].model for k in chosen)),
            **staged_selection(written),
            **method_key_material(written),
        },
    )

    def initial_student():
        model, kept = shallow_student(bundles[init], params, spec.name)
        return model, bundles[init].tokenizer, kept

    job = DistillJob(
        store=store,
        initial_student=initial_student,
        teachers=[
            Teacher(bundles[k].model, teacher_prefix(k), caches[k] if caches else None, names[i])
            for i, k in enumerate(chosen)
        ],
        teacher_tokenizers={teacher_prefix(k): b.tokenizer for k, b in enumerate(bundles)},
        recipe=recipe,
        method_objects={},
        student_params=params,
        settings=run,
        row=recipe["method"],
        data=data,
        multi_teacher=True,
        run_name=f"distill_multi_teacher:{recipe['method']}[{','.join(names)}]:{spec.name}",
    )
    return train_student(job)


def evaluate_multi_student(bundle: ModelBundle, data, task: str, tracking: dict) -> dict:
    """Student metrics on its own tokenization (teacher columns ignored)."""
    view = {
        split: data[split].select_columns([c for c in data[split].column_names if not TEACHER_COLUMN.match(c)])
        for split in data
    }
    evaluation = evaluate_bundle(bundle, view, task)
    tracker_for(tracking).log_evaluation(Lineage.of(bundle.info).run_id, evaluation)
    return evaluation


#: The comparison's columns of a method that selects teachers per example (RL-KD): each teacher's share over the
#: run, and its share in each epoch (first → last: whether the policy learned to leave a teacher).
SELECTION_COLUMN = "teachers chosen (share of examples)"
SELECTION_BY_EPOCH_COLUMN = "teachers chosen by epoch"


def selection_shares(info: dict) -> dict:
    """``{SELECTION_COLUMN: "minilm_seed42 0.62, minilm_seed7 0.41", SELECTION_BY_EPOCH_COLUMN: "minilm_seed42
    0.55→0.70, minilm_seed7 0.48→0.31"}`` for a student whose method chose teachers per example (its alignment
    report has ``selection_share``; the epochs' shares are ``observed_by_epoch``, or its training history's
    ``observed``), else ``{}``."""
    shares = {
        name: entry["selection_share"]
        for name, entry in (info.get("alignment") or {}).items()
        if isinstance(entry, dict) and entry.get("selection_share") is not None
    }
    if not shares:
        return {}
    columns = {SELECTION_COLUMN: ", ".join(f"{name} {share:.2f}" for name, share in shares.items())}
    epochs = info.get("observed_by_epoch") or [record.get("observed") or {} for record in info.get("history") or []]
    by_epoch = {
        name: [epoch[f"selection_share/{name}"] for epoch in epochs if f"selection_share/{name}" in epoch]
        for name in shares
    }
    if any(by_epoch.values()):
        columns[SELECTION_BY_EPOCH_COLUMN] = ", ".join(
            f"{name} " + "→".join(f"{share:.2f}" for share in values) for name, values in by_epoch.items() if values
        )
    return columns


def compare_multi_teacher(teacher_metrics: list[dict], *students: dict):
    """Tables 2 (by teachers) and 3 (by strategy) of the paper, plus a bar chart."""
    best_teacher = max(teacher_metrics, key=lambda e: e["score"])
    rows = [
        {
            "configuration": f"teacher {e['name']}",
            "method": "teacher",
            "teachers": e["name"],
            e["primary_metric"]: round(e["score"], 4),
            "% of best teacher": round(100 * e["score"] / best_teacher["score"], 1),
        }
        for e in teacher_metrics
    ]
    students = sorted(students, key=lambda e: -sort_score(e.get("score")))  # top score first
    for e in students:
        info = e["info"]
        rows.append(
            {
                "configuration": info.get("configuration"),
                "method": info.get("method"),
                "teachers": "+".join(info.get("teachers", [])),
                e["primary_metric"]: round(e["score"], 4),
                "% of best teacher": round(100 * e["score"] / best_teacher["score"], 1),
                **selection_shares(info),
            }
        )
    student_rows = rows[len(teacher_metrics) :]
    majority = majority_row(best_teacher, students, kept_column="% of best teacher")
    if majority:  # the floor: only the columns of this table
        rows.insert(
            len(teacher_metrics),
            {
                "configuration": MAJORITY_METHOD,
                "method": MAJORITY_METHOD,
                "teachers": "",
                **{k: majority[k] for k in (best_teacher["primary_metric"], "% of best teacher")},
            },
        )
    table = pd.DataFrame(rows)
    metric = best_teacher["primary_metric"]
    by_teachers = table[table["method"].isin(["teacher", MAJORITY_METHOD, "multi_teacher"])]
    by_strategy = table[table["method"] != "teacher"]
    verdict = table_verdict(
        student_rows, majority, metric, best_teacher, label=lambda r: f"{r['method']}[{r['teachers']}]"
    )
    body = (
        "## Table 2: by teachers\n\n"
        + markdown_table(display_frame(by_teachers, metric))
        + "\n## Table 3: by strategy\n\n"
        + markdown_table(display_frame(by_strategy, metric))
    )
    title = comparison_title("distill_multi_teacher_baselines (Tables 2–3)", best_teacher["task"], metric)
    markdown = with_verdict(body, verdict, title)
    students_only = table[~table["method"].isin(["teacher", MAJORITY_METHOD])]
    figure = comparison_bars(
        [
            tied_name(f"{m}\n{t}", f"{m}[{t}]", verdict)
            for m, t in zip(students_only["method"], students_only["teachers"])
        ],
        list(students_only[metric]),
        best_teacher["score"],
        metric,
        comparison_title("distill_multi_teacher_baselines", best_teacher["task"], metric),
        floor=majority.get(metric) if majority else None,
        noise=verdict.tolerance,
    )
    kedro_run().log_comparison(
        Comparison(
            "multi_teacher_comparison",
            markdown,
            figure,
            table,
            metric,
            body=body,
            title=title,
            warning=verdict.warning,
            teacher_run_id=Lineage.of(best_teacher.get("info")).model_run_id,
        )
    )
    return table, markdown, figure


def register_best_multi_student(table: pd.DataFrame, teacher_metrics: list[dict], students: list, settings) -> dict:
    """[`register_best_student`][] for Tables 2–3 (rows named
    ``<method>[<teachers>]``; the best teacher is the reference); ``students``: the comparison's student
    evaluations gathered into one input ([`gather_students`][registration.gather_students])."""
    best_teacher = max(teacher_metrics, key=lambda e: e["score"])
    return register_best_student(
        table,
        best_teacher,
        settings,
        *students,
        table_name="distill_multi_teacher_baselines",
        label=lambda info: f"{info.get('method')}[{'+'.join(info.get('teachers', []))}]",
    )


def multi_teacher_contributions(student: ModelBundle, settings):
    """Each teacher's and each layer group's share of the MT loss on dev at the end of training
    ([`bert_kd.core.distill.methods.multi_teacher.contributions`][], recorded by the distillation
    job in ``info["contributions"]``). → (CSV table, figure)."""
    contributions = student.info.get("contributions")
    configuration = student.info.get("configuration", student.info.get("method", "?"))
    title = f"Multi-teacher: loss share per teacher and layer group ({configuration})"
    if not contributions:
        reason = (
            f"the student of {configuration} has no recorded contributions (method "
            f"{student.info.get('method')!r}: only 'multi_teacher' records them; a model stored by an older "
            "bert-kd: rerun with runtime.recompute: true)"
        )
        log.warning("multi-teacher contributions not drawn: %s", reason)
        table, figure = pd.DataFrame([{"not_drawn": reason}]), unavailable_figure(title, reason)
    else:
        table = contributions_table(contributions)
        figure = contributions_figure(
            table,
            f"{title}\n{task_of(settings)} {contributions.get('split', 'dev')}, "
            f"{contributions['examples']} examples, total loss {contributions['total']:.4f}",
        )
    kedro_run().log_report("figures/multi_teacher_contributions", table, figure)
    return table, figure
