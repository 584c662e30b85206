"""A trial is a registered pipeline plus parameter overrides: a table row may name any pipeline the registry
composes (here Tang et al.'s BiLSTM without and with the transfer set) and dotted overrides; both enter the
trial's identity, and a default row's key stays as it was."""

from __future__ import annotations

import pytest

from bert_kd.sweeps.spec import build_sweep
from bert_kd.sweeps.trial import TrialRunner, trial_identity
from bert_kd.sweeps.trial_results import ResultsFolder
from tests.sweeps.test_trial import RECIPES, TINY, project_params

TANG = {"bilstm": {"hidden_size": 8, "classifier_size": 8}, "training": {**TINY, "learning_rate": 1e-3}}
RECIPES_WITH_TANG = {
    **RECIPES,
    "distill_methods": {**RECIPES["distill_methods"], "logits_mse": {"method": "logits_mse"}},
}


def bilstm_table(copies: int = 2, **row) -> dict:
    """Two arms of one cell, paired by seed: the BiLSTM without and with a transfer set of ``copies`` rewrites."""
    transfer = {"augment.copies": copies, "augment.max_source_rows": 8}
    return {
        "table": "pair",
        "tables": {
            "pair": {
                "tasks": ["rte"],
                "seeds": [1],
                "paired": {"arms": ["plain", "transfer"]},
                "methods": {
                    "plain": {
                        "recipe": "distill_methods.logits_mse",
                        "pipeline": "distill_bilstm",
                        "arm": "plain",
                        "cell": "bilstm",
                    },
                    "transfer": {
                        "recipe": "distill_methods.logits_mse",
                        "pipeline": "distill_bilstm_transfer",
                        "overrides": transfer,
                        "arm": "transfer",
                        "cell": "bilstm",
                        **row,
                    },
                },
            }
        },
    }


@pytest.fixture
def params(tiny_teacher_dir, tiny_glue_dir):
    return {**project_params(tiny_teacher_dir, tiny_glue_dir), "tang_student": TANG, "augment": {"rules": ["mask"]}}


def test_a_named_pipeline_and_its_overrides_are_the_trials_identity(params):
    plain, transfer = build_sweep(bilstm_table(), RECIPES_WITH_TANG).trials()
    identity = trial_identity(params)
    assert (plain.pipeline_name, transfer.pipeline_name) == ("distill_bilstm", "distill_bilstm_transfer")
    material = identity.key_material(transfer)
    assert material["trial"]["pipeline"] == "distill_bilstm_transfer"
    assert material["trial"]["overrides"] == {"augment.copies": 2, "augment.max_source_rows": 8}
    assert material["blocks"]["augment"]["copies"] == 2  # the block the transfer set is built from, overrides applied
    assert "blocks" not in identity.key_material(plain) and identity.student_name(plain) == "tang_student"
    other = build_sweep(bilstm_table(copies=3), RECIPES_WITH_TANG).trials()[1]
    assert identity.content_key(other) != identity.content_key(transfer)
    # a default row (no pipeline named, no overrides) is described as before: no new field in its key
    nkd = build_sweep(
        {
            "table": "t",
            "tables": {"t": {"tasks": ["rte"], "seeds": [1], "methods": {"nkd": {"recipe": "distill_methods.nkd"}}}},
        },
        RECIPES,
    ).trials()[0]
    assert nkd.pipeline_name == "distill_nkd" and not {"pipeline", "overrides"} & set(nkd.as_dict())
    assert "blocks" not in identity.key_material(nkd)


def test_a_row_naming_no_registered_pipeline_or_one_with_several_students_is_refused(params):
    unknown = build_sweep(bilstm_table(pipeline="distill_bilstm_transfr"), RECIPES_WITH_TANG).trials()[1]
    with pytest.raises(ValueError, match=r"pair.methods.transfer.pipeline: 'distill_bilstm_transfr' is not a regis"):
        trial_identity(params).content_key(unknown)
    several = build_sweep(bilstm_table(pipeline="distill_ted_baselines"), RECIPES_WITH_TANG).trials()[1]
    with pytest.raises(
        ValueError, match=r"distill_ted_baselines trains \d+ students .*a table row's pipeline trains one"
    ):
        trial_identity(params).content_key(several)


def test_paired_arms_are_checked():
    table = bilstm_table()
    table["tables"]["pair"]["methods"]["transfer"]["arm"] = "plain"
    with pytest.raises(ValueError, match=r"cell 'bilstm' has arms \['plain', 'plain'\]"):
        build_sweep(table, RECIPES_WITH_TANG)
    table["tables"]["pair"]["paired"] = {"arms": ["plain"]}
    with pytest.raises(ValueError, match=r"paired must be \{arms: \[<reference arm>, <compared arm>\]\}"):
        build_sweep(table, RECIPES_WITH_TANG)


@pytest.mark.slow  # two tiny trials and a transfer set: about a minute and a half on two shared cores
def test_the_bilstm_pair_runs_its_registered_pipelines(params, tmp_path, monkeypatch):
    """Both arms run their registry pipelines on the trial's rows: one teacher (the teacher seed's) for both, the
    transfer arm's student trained on the training rows and their rewrites."""
    monkeypatch.chdir(tmp_path)
    runner = TrialRunner(params, ResultsFolder(path=tmp_path / "results", commit=""))
    plain, transfer = build_sweep(bilstm_table(), RECIPES_WITH_TANG).trials()
    results = [runner(plain), runner(transfer)]
    assert all(len(r["dev_predictions"]) == 24 for r in results)  # tiny RTE's dev rows
    assert results[0]["teacher_dev_metrics"] == results[1]["teacher_dev_metrics"]
    assert len(list((tmp_path / "data/06_models/store/teacher").iterdir())) == 1
    assert results[0]["model_key"] != results[1]["model_key"]


def test_a_tables_teacher_may_read_its_own_rows(params, tmp_path, monkeypatch):
    """``data.<task>.teacher_train_samples``: the teacher fine-tuned on the whole training split (null) while the
    student reads ``max_train_samples`` of it; the option enters the key only where a table sets it."""
    monkeypatch.chdir(tmp_path)
    seen = []
    from bert_kd.sweeps import trial as trial_module

    evaluate = trial_module.dev_metrics

    def dev_metrics(bundle, data, task):
        seen.append((bundle.info.get("train_examples"), len(data["train"])))
        return evaluate(bundle, data, task)

    monkeypatch.setattr(trial_module, "dev_metrics", dev_metrics)
    table = {
        "table": "t",
        "tables": {
            "t": {
                "tasks": ["rte"],
                "seeds": [1],
                "data": {"rte": {"max_train_samples": 16, "teacher_train_samples": None}},
                "methods": {"nkd": {"recipe": "distill_methods.nkd"}},
            }
        },
    }
    (spec,) = build_sweep(table, RECIPES).trials()
    runner = TrialRunner(params, ResultsFolder(commit=""))
    assert runner.identity.teacher_train_samples(spec) == (True, None)
    plain = build_sweep({**table, "tables": {"t": {**table["tables"]["t"], "data": {}}}}, RECIPES).trials()[0]
    assert runner.identity.teacher_train_samples(plain) == (False, None)
    assert runner.content_key(spec) != runner.content_key(plain)
    result = runner.train_and_evaluate(spec)
    assert seen == [(48, 16)]  # the teacher trained on tiny RTE's 48 rows, the rows it labels for the student: 16
    assert len(result["dev_predictions"]) == 24
