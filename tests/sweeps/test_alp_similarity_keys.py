"""ALP's ``similarity: dot`` (Eq. 5 as printed, every ALP trial's score before the score was an option) keeps
every committed ALP trial's content key; another score gives other trials (results/cpu_protocol_v2_alpha), and a
recipe naming none (the main job's) is keyed with the default score by name."""

from __future__ import annotations

import json

from bert_kd.sweeps.spec import RECIPE_NAMESPACES, build_sweep
from bert_kd.sweeps.trial import trial_identity
from tests.sweeps.test_committed_results import ROOT, project_params

#: v2's ALP trials as committed (results/cpu_protocol_v2), before α's score was an option: one per task
PINNED = {
    "alp|mrpc|seed=1|training.learning_rate=0.0001": "14a09e0c86c584baf4329079d7c56cac1a1f701ca642c11fd23422ddc819bdc3",
    "alp|sst2|seed=8|training.learning_rate=0.0001": "658a78c31f85c63e115fb4ab4b71c1816450626c60526da6bf937cfc1fa40a4c",
}


def alp_keys(table: str, prefix: str) -> dict[str, str]:
    params = project_params({"reproduce": {"table": table, "results_only": True}, "glue_dir": "../shared/glue"})
    sweep = build_sweep(params["reproduce"], {ns: params.get(ns) or {} for ns in RECIPE_NAMESPACES})
    identity = trial_identity(params)
    return {t.key: identity.content_key(t) for t in sweep.trials() if t.key.startswith(prefix)}


def test_the_raw_dot_product_keeps_v2s_alp_keys():
    keys = alp_keys("cpu_protocol_v2", "alp|")
    assert len(keys) == 18 and {k: keys[k] for k in PINNED} == PINNED
    for trial, key in keys.items():
        record = json.loads((ROOT / "results" / "cpu_protocol_v2" / f"{key}.json").read_text(encoding="utf-8"))
        assert record["key"] == key and record["trial"] == trial
        assert "similarity" not in record["spec"]["trial"]["recipe"]


def test_a_variant_score_gives_other_trials():
    variant = alp_keys("cpu_protocol_v2_alpha", "alp_scaled|")
    assert len(variant) == 18 and not set(variant.values()) & set(alp_keys("cpu_protocol_v2", "alp|").values())


def test_the_main_jobs_alp_names_no_score_and_its_key_holds_the_default():
    from bert_kd.core.distill.losses import ALP_DEFAULT_SIMILARITY
    from bert_kd.core.distill.methods import recipe_key_material

    recipe = project_params({"glue_dir": "../shared/glue"})["distill_methods"]["alp"]
    assert "similarity" not in recipe  # the method's default, written once (losses.ALP_DEFAULT_SIMILARITY)
    assert recipe_key_material(recipe)["similarity"] == ALP_DEFAULT_SIMILARITY != "dot"


def test_v1s_alp_trials_keep_their_keys():
    keys = alp_keys("cpu_protocol", "alp")  # ALP and ALP (λ=2), both naming Eq. 5's dot
    assert len(keys) == 9 and all((ROOT / "results" / "cpu_protocol" / f"{k}.json").exists() for k in keys.values())
