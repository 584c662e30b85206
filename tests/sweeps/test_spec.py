from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bert_kd.sweeps.spec import build_sweep, grid_points, parse_restriction
from tests.sweeps.conftest import RECIPES, tiny_reproduce

CONF = Path(__file__).resolve().parents[2] / "conf" / "base"


def test_tiny_sweep_is_methods_times_tasks_times_seeds_times_grid():
    sweep = build_sweep(tiny_reproduce(), RECIPES)
    trials = sweep.trials()
    assert len(trials) == 2 * 2 * 2 * 2
    assert len({t.key for t in trials}) == 16
    alp = next(t for t in trials if t.method == "alp" and t.params["training.learning_rate"] == 5e-5)
    assert alp.training == {"learning_rate": 5e-5}
    assert alp.recipe["weights"] == {"kd": 0.5, "layer": 0.2} and alp.job == "distill"


def test_a_grouped_tables_trials_say_how_their_batches_are_seeded_and_random_ones_say_nothing():
    """Grouped batches changed their seeding (the loader's own generator), so their trial keys
    changed; random batches (every committed trial) keep batching out of their keys."""
    random = build_sweep(tiny_reproduce(), RECIPES).trials()
    grouped_reproduce = tiny_reproduce()
    grouped_reproduce["tables"]["tiny"]["group_by_length"] = True
    grouped = build_sweep(grouped_reproduce, RECIPES).trials()
    assert all("group_by_length" not in t.settings and "grouped_sampler" not in t.settings for t in random)
    assert all(t.settings["group_by_length"] is True and t.settings["grouped_sampler"] == 2 for t in grouped)
    assert [t.key for t in grouped] == [t.key for t in random]  # same grid: the same Optuna study


def test_grid_restriction_keeps_the_named_values_and_the_study():
    full = build_sweep(tiny_reproduce(), RECIPES)
    sweep = build_sweep(tiny_reproduce(grid="training.learning_rate=5e-5"), RECIPES)
    assert {t.params["training.learning_rate"] for t in sweep.trials()} == {5e-5} and len(sweep.trials()) == 8
    assert sweep.fingerprint == full.fingerprint  # same study: restricted runs reuse its trials
    assert len(build_sweep(tiny_reproduce(grid={"training.learning_rate": [1e-5, 5e-5]}), RECIPES).trials()) == 16
    with pytest.raises(ValueError, match="reproduce.grid"):
        build_sweep(tiny_reproduce(grid="training.learning_rate=3e-3"), RECIPES)
    with pytest.raises(ValueError, match="reproduce.grid"):
        build_sweep(tiny_reproduce(grid="training.epochs=3"), RECIPES)


def test_restriction_strings_and_lists_restrict_the_table():
    sweep = build_sweep(tiny_reproduce(tasks="SST-2", methods="alp nkd", seeds="2"), RECIPES)
    assert sweep.tasks == ("sst2",) and sweep.seeds == (2,) and [m.name for m in sweep.methods] == ["nkd", "alp"]
    assert len(sweep.trials()) == 2 * 2
    assert parse_restriction([1, "2"], "reproduce.seeds", [1, 2], convert=int) == [1, 2]
    assert parse_restriction("", "reproduce.tasks", ["rte"]) is None


def test_unknown_method_names_the_valid_ones():
    with pytest.raises(ValueError, match=r"reproduce.methods: unknown 'tinybert'; valid: nkd alp"):
        build_sweep(tiny_reproduce(methods="nkd tinybert"), RECIPES)
    with pytest.raises(ValueError, match=r"reproduce.seeds.*valid: 1 2"):
        build_sweep(tiny_reproduce(seeds="3"), RECIPES)
    with pytest.raises(ValueError, match=r"reproduce.table: unknown table 'nope'; valid: tiny"):
        build_sweep({**tiny_reproduce(), "table": "nope"}, RECIPES)


def test_unknown_recipe_is_named():
    reproduce = tiny_reproduce()
    reproduce["tables"]["tiny"]["methods"]["ckd"] = {"recipe": "distill_methods.ckd"}
    with pytest.raises(ValueError, match=r"tiny.methods.ckd: recipe 'distill_methods.ckd' not found"):
        build_sweep(reproduce, RECIPES)


def test_a_row_may_override_the_student_and_other_rows_keep_their_settings():
    reproduce = tiny_reproduce()
    table = reproduce["tables"]["tiny"]
    table["student"] = {"num_layers": 2, "layer_selection": "first"}
    before = {t.key: t.as_dict() for t in build_sweep(reproduce, RECIPES).trials()}
    table["methods"]["alp"]["student"] = {"layer_selection": "distilbert"}
    after = build_sweep(reproduce, RECIPES).trials()
    for trial in after:
        if trial.method == "alp":
            assert trial.settings["student"] == {"num_layers": 2, "layer_selection": "distilbert"}
        else:  # unchanged, so their content keys (and stored results) are too
            assert trial.as_dict() == before[trial.key]


def test_unknown_method_entry_key_is_named_with_the_valid_ones():
    reproduce = tiny_reproduce()
    reproduce["tables"]["tiny"]["methods"]["alp"]["studnet"] = {"num_layers": 2}
    with pytest.raises(
        ValueError, match=r"tiny.methods.alp: unknown key\(s\) studnet; valid: arm, baseline, cell, grid"
    ):
        build_sweep(reproduce, RECIPES)


def test_constraint_drops_grid_points_with_negative_ce_weight():
    grid = {"method.weights.kd": [0, 0.2, 0.5, 0.7], "method.weights.layer": [0, 0.2, 0.5, 0.7]}
    points = grid_points(grid, [{"sum_at_most": 1.0, "of": ["method.weights.kd", "method.weights.layer"]}])
    assert len(points) == 16 - 3  # (0.5, 0.7), (0.7, 0.5), (0.7, 0.7) make β < 0
    assert all(p["method.weights.kd"] + p["method.weights.layer"] <= 1.0 for p in points)


def _conf_recipes():
    recipes = {}
    for name in ("parameters.yml", "parameters_distill.yml", "parameters_ted.yml", "parameters_multi_teacher.yml"):
        recipes.update(yaml.safe_load((CONF / name).read_text()))
    return recipes


@pytest.mark.parametrize(
    "table", ["alp_kd_table1", "alp_kd_table2", "alp_kd_table3", "ted_table4", "multi_teacher_tables", "cpu_protocol"]
)
def test_every_configured_table_parses(table):
    reproduce = yaml.safe_load((CONF / "parameters_reproduce.yml").read_text())["reproduce"]
    sweep = build_sweep({**reproduce, "table": table}, _conf_recipes())
    trials = sweep.trials()
    assert trials and len({t.key for t in trials}) == len(trials)
    assert sweep.baseline in [m.name for m in sweep.methods]


def test_cpu_protocol_ted_rows_start_from_layers_m_k_and_the_others_from_the_first_layers():
    reproduce = yaml.safe_load((CONF / "parameters_reproduce.yml").read_text())["reproduce"]
    sweep = build_sweep({**reproduce, "table": "cpu_protocol"}, _conf_recipes())
    selection = {t.method: t.settings["student"]["layer_selection"] for t in sweep.trials()}
    assert {m: s for m, s in selection.items() if s == "distilbert"}.keys() == {"kd", "lwd", "ted"}
    assert selection["alp"] == selection["pkd_1"] == selection["nkd"] == "first"


def test_alp_kd_table1_rows_and_pkd_map():
    reproduce = yaml.safe_load((CONF / "parameters_reproduce.yml").read_text())["reproduce"]
    sweep = build_sweep({**reproduce, "table": "alp_kd_table1"}, _conf_recipes())
    assert [m.label for m in sweep.methods] == ["NKD", "RKD", "PKD", "CKD-NO", "CKD-PO", "ALP-NO", "ALP-PO", "ALP"]
    assert sweep.method("pkd").recipe["mapping"] == "bucket_first"
    assert sweep.settings["student"]["num_layers"] == 4
    lrs = {t.params["training.learning_rate"] for t in sweep.trials()}
    assert lrs == {1e-5, 2e-5, 5e-5}


def _pkd_maps(table):
    reproduce = yaml.safe_load((CONF / "parameters_reproduce.yml").read_text())["reproduce"]
    sweep = build_sweep({**reproduce, "table": table}, _conf_recipes())
    return {m.label: m.recipe["mapping"] for m in sweep.methods if m.recipe.get("method") == "pkd"}


def test_pkd_maps_connect_the_papers_teacher_layers():
    from bert_kd.core.layer_maps import STRATEGIES, layer_map

    table3 = _pkd_maps("alp_kd_table3")  # 12 -> 2: PKD-l distils teacher layer l into student layer 1
    assert {label: layer_map(m, 12, 2) for label, m in table3.items()} == {
        "PKD-1": [[1], []],
        "PKD-6": [[6], []],
        "PKD-12": [[12], []],
    }
    cpu = _pkd_maps("cpu_protocol")  # MiniLM-L6 (6 layers) -> 2: first, middle, last
    assert {label: layer_map(m, 6, 2) for label, m in cpu.items()} == {
        "PKD-1": [[1], []],
        "PKD-3": [[3], []],
        "PKD-6": [[6], []],
        "PKD-1 (λ=2)": [[1], []],
        "PKD-6 (λ=2)": [[6], []],
    }
    assert _pkd_maps("alp_kd_table1") == {"PKD": "bucket_first"}
    if "bucket_first" not in STRATEGIES:
        pytest.skip("layer_map('bucket_first') lands with the faithful-baselines branch")
    assert layer_map("bucket_first", 12, 4) == [[1], [5], [9], []]  # ALP-KD Sec. 4: A(1..3) = h1, h5, h9


def test_trial_spec_as_dict_is_json_and_carries_everything_a_job_needs():
    import json

    reproduce = yaml.safe_load((CONF / "parameters_reproduce.yml").read_text())["reproduce"]
    sweep = build_sweep(
        {**reproduce, "table": "cpu_protocol", "methods": "pkd_3", "tasks": "sst2", "seeds": "1"}, _conf_recipes()
    )
    trial = sweep.trials()[0]
    spec = json.loads(json.dumps(trial.as_dict()))
    assert spec["job"] == "distill" and spec["recipe"]["mapping"] == [[3], []]
    assert spec["training"] == {"epochs": 5, "batch_size": 32, "learning_rate": trial.params["training.learning_rate"]}
    assert spec["settings"]["teacher"] == {"model": "minilm-l6"} and spec["settings"]["data"] == {
        "max_train_samples": 10000
    }
    assert spec["key"] == trial.key


def test_the_reproduce_block_passes_the_parameter_schema_and_parses():
    from kedro.config import OmegaConfigLoader

    from bert_kd.experiment.parameters import validate_parameters
    from bert_kd.settings import CONFIG_LOADER_ARGS

    params = OmegaConfigLoader(str(CONF.parent), **CONFIG_LOADER_ARGS)["parameters"]
    assert validate_parameters(params).reproduce.table == "cpu_protocol"
    # (11 rows × 2 tasks + 3 λ = 2 rows on MRPC) × 3 seeds at lr 1e-4 + one and two teachers on MRPC
    protocol = build_sweep(params["reproduce"], params)
    assert len(protocol.trials()) == 81 and {t.params["training.learning_rate"] for t in protocol.trials()} == {1e-4}
    # the same table with the lr grid (a YAML merge of cpu_protocol): 3× the trials, one of its grid points the protocol's
    with_grid = build_sweep({**params["reproduce"], "table": "cpu_protocol_lr_grid"}, params)
    assert len(with_grid.trials()) == 243
    assert {t.key for t in protocol.trials()} <= {t.key for t in with_grid.trials()}


def test_a_tables_own_teacher_runs_and_is_keyed_once(tiny_glue_dir):
    """A table's teacher block, stated in full, is what its trials train (it wins over the global block) and
    what their key holds, once: in the complete teacher, not again in the trial description."""
    import copy

    from bert_kd.sweeps.trial import TrialRunner
    from bert_kd.sweeps.trial_results import ResultsFolder

    reproduce = yaml.safe_load((CONF / "parameters_reproduce.yml").read_text())["reproduce"]
    restricted = {**reproduce, "table": "cpu_protocol", "methods": "alp", "tasks": "sst2", "seeds": "1"}
    trial = build_sweep(restricted, _conf_recipes()).trials()[0]
    assert trial.as_dict()["settings"]["teacher"] == {"model": "minilm-l6"}
    main_job = {"model": "minilm-l6", "max_seq_length": 48, "training": {"epochs": 2, "learning_rate": 1e-4}}
    runner = TrialRunner(
        {
            "glue_dir": str(tiny_glue_dir),
            "seed": 42,
            "teacher": main_job,
            "student": {"num_layers": 2, "training": {"epochs": 4}},
        },
        ResultsFolder(commit=""),
    )
    assert runner.identity.teacher_block(trial)["max_seq_length"] == 64
    assert runner.identity.teacher_block(trial)["training"]["learning_rate"] == 5e-5

    edited = copy.deepcopy(restricted)
    edited["tables"]["cpu_protocol"]["teacher"]["training"]["learning_rate"] = 1e-4
    other = build_sweep(edited, _conf_recipes()).trials()[0]
    assert other.as_dict() == trial.as_dict()
    assert runner.content_key(other) != runner.content_key(trial)


def test_extra_seeds_add_trials_for_their_task_only_and_keep_every_other_key():
    """A power calculation may ask for more seeds on one task (results/cpu_protocol_v2/README.md)."""
    plain = build_sweep(tiny_reproduce(), RECIPES)
    more = tiny_reproduce()
    more["tables"]["tiny"]["extra_seeds"] = {"SST-2": [3, 4]}
    sweep = build_sweep(more, RECIPES)
    keys = {t.key for t in sweep.trials()}
    assert {t.key for t in plain.trials()} < keys and len(keys) == 16 + 2 * 2 * 2
    assert {t.seed for t in sweep.trials() if t.task == "rte"} == {1, 2}
    assert {t.seed for t in sweep.trials() if t.task == "sst2"} == {1, 2, 3, 4}
    only_extra = build_sweep({**more, "seeds": "3"}, RECIPES)
    assert {(t.task, t.seed) for t in only_extra.trials()} == {("sst2", 3)}
    assert only_extra.universe == sweep.universe  # one study for the whole table
    for bad, message in (
        ({"mnli": [3]}, "not among the table's tasks"),
        ({"sst2": [2, 3]}, r"\[2\] are"),
        ({"sst2": []}, "non-empty"),
        ({"sst2": [True]}, "integer"),
        ([3], "must map tasks"),
    ):
        more["tables"]["tiny"]["extra_seeds"] = bad
        with pytest.raises(ValueError, match=f"reproduce.tables.tiny.extra_seeds.*{message}"):
            build_sweep(more, RECIPES)


def test_a_new_table_selects_epochs_on_the_papers_metric_and_keys_only_where_it_differs():
    """MRPC's paper metric is accuracy, its primary metric (acc+F1)/2: a table's MRPC trials carry
    ``select_metric: accuracy`` (and so other keys); SST-2's metrics agree, so its trials carry nothing;
    ``epoch_metric: primary`` (the committed CPU-protocol tables) keeps every trial as it was."""
    reproduce = tiny_reproduce()
    reproduce["tables"]["tiny"]["tasks"] = ["mrpc", "sst2"]
    paper = {t.task: t for t in build_sweep(reproduce, RECIPES).trials()}
    assert paper["mrpc"].settings["select_metric"] == "accuracy" and "select_metric" not in paper["sst2"].settings
    reproduce["tables"]["tiny"]["epoch_metric"] = "primary"
    primary = {t.task: t for t in build_sweep(reproduce, RECIPES).trials()}
    assert all("select_metric" not in t.settings for t in primary.values())
    reproduce["tables"]["tiny"]["epoch_metric"] = "combined"
    with pytest.raises(ValueError, match="epoch_metric must be one of paper, primary"):
        build_sweep(reproduce, RECIPES)


def test_the_committed_protocol_tables_select_on_their_primary_metric():
    tables = yaml.safe_load((CONF / "parameters_reproduce.yml").read_text(encoding="utf-8"))["reproduce"]["tables"]
    for name in ("cpu_protocol", "cpu_protocol_lr_grid", "cpu_protocol_v2"):
        assert tables[name]["epoch_metric"] == "primary", name
