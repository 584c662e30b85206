"""The one distillation body's description (:mod:`bert_kd.experiment.training_jobs.student`): run settings, student
starts and what of a recipe enters a student's content key."""

from __future__ import annotations

import pytest

from bert_kd.config.schema import Runtime, Student, set_values, typed
from bert_kd.experiment.training_jobs.student import RunSettings, StudentStart, recipe_spec, task_of


def test_run_settings_from_the_run_settings_dataset_or_as_is():
    values = {
        "task": "RTE",
        "seed": 3,
        "tracking": {"enabled": False},
        "runtime": None,
        "glue_dir": "g",
        "max_train_samples": 8,
        "max_eval_samples": None,
        "data_source": {"glue_dir": "g", "max_train_samples": 8, "max_eval_samples": None},
    }
    settings = RunSettings.of(values)
    assert (settings.task, settings.seed, settings.runtime) == ("rte", 3, Runtime())
    assert settings.data_source == {"glue_dir": "g", "max_train_samples": 8, "max_eval_samples": None}
    assert RunSettings.of(settings) is settings and task_of(settings) == "rte" and task_of("SST-2") == "sst2"
    with pytest.raises(ValueError, match="seed"):
        RunSettings.of({"task": "rte"})


def test_set_values_keeps_what_the_user_wrote():
    block = {"num_layers": 2, "model": None, "training": {"epochs": 1}}
    assert set_values(block) == block and set_values(block) is not block
    assert set_values(typed(Student, block)) == {
        "num_layers": 2,
        "model": None,
        "training": {"epochs": 1.0},
    }  # no defaults


def test_a_plain_start_adds_nothing_to_the_recipe():
    start = StudentStart(None, None, {}, params=Student(num_layers=2), row="alp_no")
    recipe = {"method": "alp", "weights": {"ce": 1.0}}
    assert start.method_inputs(recipe, None, "rte") == (recipe, {})


def test_objects_handed_to_a_method_stay_out_of_the_key():
    recipe = {
        "method": "ted",
        "task": "rte",
        "student_filters": "copy",
        "teacher_filters": object(),
        "mapping": [[1], [2]],
    }
    assert recipe_spec(recipe) == {"method": "ted", "task": "rte", "student_filters": "copy", "mapping": [[1], [2]]}


def test_progress_bars_are_labelled_with_the_table_row():
    from bert_kd.experiment.training_jobs.student import progress_label

    labels = {progress_label(row, "alp", "sst2") for row in ("alp", "alp_no", "alp_po")}
    assert labels == {"alp sst2", "alp_no (alp) sst2", "alp_po (alp) sst2"}  # three rows, three labels
