"""A trial's identity (Kedro-free): the parameter blocks a [`TrialSpec`][] trains
with, its data sizes and its content key, and how a run's data or ``--params`` make it a variant of its table.

Teachers (and TED filters, teacher caches) depend on the task, the data and the *teacher* seed (the table's
``teacher.seed`` or the global ``seed``), never on the trial seed, so every trial of a task shares them.

What a trial trains is read from the parameter blocks its registered pipeline reads (``reads``: given by the
trial runner, which composes the pipeline): the student block it trains (``student``, ``ted_student``,
``multi_student``, ``tang_student``), TED's ``ted``, the ``multi_teachers`` and any other block (``augment``,
``general``, ...), so that no part of the sweep names a pipeline family.
"""

from __future__ import annotations

import copy
import logging
from typing import Callable, Collection, Mapping

from bert_kd.core.distill.methods import recipe_key_material
from bert_kd.core.models import init_key_material
from bert_kd.core.training.precision import trial_precision_material
from bert_kd.experiment import jobs
from bert_kd.experiment.run_setup import teacher_seed
from bert_kd.sweeps.identity import keyed_source, short_hash
from bert_kd.sweeps.spec import TrialSpec

log = logging.getLogger(__name__)

#: Bump when the meaning of a stored trial result changes (new key material, other metric).
TRIAL_SCHEMA = 1
DATA_SEED_KEY = "seed"
DATA_KEYS = ("max_train_samples", "max_eval_samples")
#: A table's training rows for its teachers where they differ from its students' (``data.<task>``; in the key
#: through the trial's settings, where a table sets it).
TEACHER_ROWS_KEY = "teacher_train_samples"
#: The blocks a pipeline's student is built from: a trial's pipeline reads exactly one (the table's ``student``
#: settings and ``training`` go there).
STUDENT_BLOCKS = ("student", "ted_student", "multi_student", "tang_student")
#: Blocks a trial's key holds in its own fields (``teacher``, ``student``, ``ted``, ``teachers``, the recipe in
#: ``trial``) or that change no number (``teacher_cache``, ``figures``, the run settings): any other block the
#: pipeline reads is key material under ``blocks`` (a default row reads none, so its key is as before).
KEYED_ELSEWHERE = frozenset(
    {
        "teacher",
        "teacher_cache",
        "ted",
        "multi_teachers",
        "figures",
        *STUDENT_BLOCKS,
        "distill_methods",
        "ted_methods",
        "multi_teacher_configs",
        "task",
        "seed",
        "tracking",
        "runtime",
        "glue_dir",
        *DATA_KEYS,
    }
)
Reads = Callable[[TrialSpec], Collection[str]]


def merged(base: Mapping | None, *overrides: Mapping | None) -> dict:
    """Recursive dict merge: later mappings win, nested mappings are merged key by key."""
    result = copy.deepcopy(dict(base or {}))
    for override in overrides:
        for key, value in (override or {}).items():
            if isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
                result[key] = merged(result[key], value)
            else:
                result[key] = copy.deepcopy(value)
    return result


class TrialIdentity:
    """What a trial is, from the project parameters.

    ``params``: the parameter tree (``teacher``, ``student``, ``runtime``, ``tracking``, ``teacher_cache``,
    ``ted``, ``ted_student``, ``multi_teachers``, ``multi_student``, ``glue_dir``, ``seed``).
    ``data_overrides``: ``max_train_samples`` / ``max_eval_samples`` that replace the table's per-task sizes
    (the ones given on the command line). ``conf_params``: the parameters without the command line's
    ``--params`` ([`setting_changes`][]); None: not known. ``reads``: the top-level parameter blocks a trial's
    pipeline reads (the trial runner's [`TrialPipelines`][bert_kd.sweeps.trial.TrialPipelines]).
    """

    def __init__(
        self,
        params: Mapping,
        data_overrides: Mapping | None = None,
        conf_params: Mapping | None = None,
        *,
        reads: Reads,
    ):
        self.reads = reads
        self.params = copy.deepcopy(dict(params))
        self.conf_params = copy.deepcopy(dict(conf_params)) if conf_params is not None else None
        self.data_overrides = {k: v for k, v in (data_overrides or {}).items() if k in DATA_KEYS}

    def table_sizes(self, spec: TrialSpec) -> dict:
        """The data sizes the table gives the trial (``data:`` per task), before command-line sizes."""
        sizes = dict.fromkeys(DATA_KEYS)
        sizes.update({k: v for k, v in (spec.settings.get("data") or {}).items() if k in sizes})
        return sizes

    def data_sizes(self, spec: TrialSpec) -> dict:
        return {**self.table_sizes(spec), **self.data_overrides}

    def teacher_train_samples(self, spec: TrialSpec) -> tuple[bool, int | None]:
        """(whether the teacher reads other training rows than the students, how many: None = the whole split):
        a table's ``data.<task>.teacher_train_samples`` (e.g. null: the teacher fine-tuned on the whole training
        split while its students read ``max_train_samples`` of it, so that a small-data table's teacher is not at
        the majority-class floor). Absent: the students' rows (every table before the option)."""
        data = spec.settings.get("data") or {}
        if TEACHER_ROWS_KEY not in data:
            return False, None
        return True, data[TEACHER_ROWS_KEY]

    def data_changes(self, trials) -> dict:
        """How the data of this run's ``trials`` differ from their table's own: command-line sizes
        that change some trial's sizes, and GLUE files that are not the release (``glue``: a short
        hash of their fingerprints). Empty: the table's own data."""
        trials = list(trials)
        changes = {
            name: value
            for name, value in self.data_overrides.items()
            if any(self.table_sizes(t)[name] != value for t in trials)
        }
        sources = {
            t.task: source for t in trials if (source := keyed_source(t.task, self.params.get("glue_dir"))) is not None
        }
        if sources:
            changes["glue"] = short_hash(sources)
        return changes

    def setting_changes(self, trials) -> dict:
        """``{"params": <short hash>}`` when the command line's ``--params`` change the content key of some of
        ``trials`` (a setting the table does not state, e.g. ``student.training.warmup_ratio`` or ``ted.*``):
        the run is then a variant of the table, not the table. Data sizes and GLUE files are
        [`data_changes`][]' and are left out here. Empty
        when nothing changes or ``conf_params`` is unknown."""
        if self.conf_params is None:
            return {}
        reference = TrialIdentity(
            {**self.conf_params, "glue_dir": self.params.get("glue_dir")}, self.data_overrides, reads=self.reads
        )
        keys = {t.key: (t, self.content_key(t)) for t in trials}
        changed = {name: key for name, (t, key) in keys.items() if key != reference.content_key(t)}
        if not changed:
            return {}
        spec = keys[next(iter(changed))][0]
        ours, theirs = self.key_material(spec), reference.key_material(spec)
        parts = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))
        log.warning(
            "--params change %d trial(s) of %s (e.g. %s: key material %s differs from the configuration's): "
            "the run is a variant, its table is not written as %s",
            len(changed),
            spec.table,
            spec.key,
            ", ".join(parts),
            spec.table,
        )
        return {"params": short_hash(changed)}

    def key_material(self, spec: TrialSpec) -> dict:
        """Everything (but the GLUE files and model weights) that determines the trial's result."""
        p = self.params
        trial = {k: v for k, v in spec.as_dict().items() if k != "label"}  # a relabelled row keeps its results
        if "student" in trial["settings"]:  # student.init: teacher stays out of keys (as before the option)
            trial["settings"]["student"] = init_key_material(trial["settings"]["student"])
        trial["recipe"] = recipe_key_material(trial["recipe"])  # ALP: the score by name unless Eq. 5's dot
        if "overrides" in trial:  # the transfer set's pair scheme is keyed in its block, where it is read
            trial["overrides"] = {k: v for k, v in trial["overrides"].items() if k != "augment.pair_single"}
        reads, tree = set(self.reads(spec)), self.parameters(spec)
        others = sorted(reads - KEYED_ELSEWHERE)
        return {
            "schema": TRIAL_SCHEMA,
            "trial": trial,
            "data": self.data_sizes(spec),
            "data_seed": tree.get(DATA_SEED_KEY),
            "teacher": keyed(tree["teacher"]),
            "student": keyed(init_key_material(tree[self.student_name(spec)])),
            "ted": keyed(tree.get("ted")) if "ted" in reads else None,
            "teachers": [keyed(t) for t in tree["multi_teachers"]] if "multi_teachers" in reads else None,
            **({"blocks": {name: block_key(name, tree.get(name), spec.task) for name in others}} if others else {}),
            "precision": trial_precision_material(p.get("runtime") or {}),
            # GLUE files other than the release's (absent for the release: the committed keys stay valid)
            **({"source": source} if (source := keyed_source(spec.task, p.get("glue_dir"))) is not None else {}),
        }

    def content_key(self, spec: TrialSpec) -> str:
        return jobs.content_key("trial", self.key_material(spec))

    def student_name(self, spec: TrialSpec) -> str:
        """The student block the trial's pipeline trains (one of [`STUDENT_BLOCKS`][])."""
        names = [name for name in STUDENT_BLOCKS if name in set(self.reads(spec))]
        if len(names) != 1:
            raise ValueError(
                f"reproduce.tables.{spec.table}.methods.{spec.method}: pipeline {spec.pipeline_name} reads "
                f"{len(names)} student blocks ({', '.join(names) or 'none'}); a table row's pipeline trains one student"
            )
        return names[0]

    def parameters(self, spec: TrialSpec) -> dict:
        """The parameter tree the trial's pipeline runs with: the project's, the table's ``teacher`` (and
        ``teachers``), its ``student`` settings and ``training`` on the student block the pipeline trains, then the
        row's ``overrides`` (dotted paths); the recipe is placed by the runner, where the pipeline reads it."""
        tree = copy.deepcopy(self.params)
        tree["teacher"] = merged(self.params.get("teacher"), spec.settings.get("teacher"))
        name = self.student_name(spec)
        block = merged(self.params.get(name), spec.settings.get("student"))
        block["training"] = merged(block.get("training"), spec.training)
        tree[name] = block
        tree["multi_teachers"] = copy.deepcopy(
            list(spec.settings.get("teachers") or self.params.get("multi_teachers") or [])
        )
        tree = merged(tree, nested(spec.overrides))
        for path in spec.settings.get("trial_seed_at") or ():  # the table draws these per seed
            tree = merged(tree, nested({path: spec.seed}))
        return tree

    def data_seed(self, spec: TrialSpec) -> int:
        """The seed the task's rows are sampled (and a held-out slice cut) with: the project's ``seed``, or the
        trial's where the table says ``trial_seed_at: [seed, ...]``."""
        return int(self.parameters(spec).get(DATA_SEED_KEY, 42))

    def teacher_block(self, spec: TrialSpec) -> dict:
        return self.parameters(spec)["teacher"]

    def teacher_seed(self, spec: TrialSpec) -> int:
        return teacher_seed(self.teacher_block(spec), self.params.get(DATA_SEED_KEY, 42))

    def student_block(self, spec: TrialSpec) -> dict:
        return self.parameters(spec)[self.student_name(spec)]

    def teacher_blocks(self, spec: TrialSpec) -> list[dict]:
        return self.parameters(spec)["multi_teachers"]


def nested(dotted: Mapping) -> dict:
    """``{"augment.copies": 4}`` → ``{"augment": {"copies": 4}}``: a row's overrides as a parameter tree."""
    tree: dict = {}
    for path, value in dotted.items():
        node = tree
        *parents, leaf = str(path).split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = copy.deepcopy(value)
    return tree


def block_key(name: str, block: Mapping | None, task: str) -> dict | None:
    """A block a trial's pipeline reads, as key material ([`keyed`][]); the transfer set's ``pair_single`` only
    where it is read (Tang's rules on a task of sentence pairs), as its job's key has it: a trial whose set it does
    not change keeps the key it had before the option."""
    result = keyed(block)
    if name == "augment" and result is not None and "pair_single" in result:
        from bert_kd.core.data.augment import TINYBERT_RULES
        from bert_kd.core.data.glue import get_task

        read = get_task(task).has_pair and tuple(result.get("rules") or ()) != tuple(TINYBERT_RULES)
        if not read or result["pair_single"] == 0:  # 0: both sentences rewritten, the scheme before the option
            result = {k: v for k, v in result.items() if k != "pair_single"}
    return result


def keyed(block: Mapping | None) -> dict | None:
    """A parameter block as key material: no ``retrain`` flag, training settings that change weights only."""
    if block is None:
        return None
    result = {k: v for k, v in block.items() if k != "retrain"}
    for name, value in result.items():
        if name == "training" and isinstance(value, Mapping):
            result[name] = jobs.training_spec(value)
        elif isinstance(value, Mapping):
            result[name] = keyed(value)
    return result
