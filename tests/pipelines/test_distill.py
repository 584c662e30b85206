"""End to end: the ALP-KD family pipelines on a tiny teacher."""

from __future__ import annotations

import json

import mlflow
import pandas as pd
import pytest
import yaml

from tests.pipelines.conftest import TINY_TRAINING, latest_version, mlflow_runs


def test_distill_alp_end_to_end(run_pipeline, tiny_glue_dir):
    _, root, uri = run_pipeline("distill_alp")
    tiny_train_rows = len(pd.read_csv(tiny_glue_dir / "RTE" / "train.tsv", sep="\t"))
    metrics = json.loads(latest_version(root / "data/08_reporting/students/alp_metrics.json").read_text())
    student = root / metrics["info"]["store_path"]  # the run's own model in the content-keyed store
    assert student.parent == root / "data/06_models/store/student"
    assert (student / "config.json").exists()
    assert json.loads((student / "config.json").read_text())["num_hidden_layers"] == 2
    from huggingface_hub import ModelCard

    card = ModelCard.load(student / "README.md")  # the hub model card, written when the job ends
    assert {(r.dataset_config, r.metric_type) for r in card.data.eval_results} >= {("rte", "accuracy")}
    assert "1←1+2+3+4, 2←—" in card.text and "Noise of one dev-set run**: ±0.1021 (24 dev examples" in card.text
    assert ModelCard.load(
        student.parent.parent / "teacher" / metrics["info"]["teacher_key"] / "README.md"
    ).data.eval_results
    alpha = metrics["info"]["diagnostics"]["alp_attention"]
    assert len(alpha) == 2 and len(alpha[0]) == 4  # 2 student layers × 4 teacher layers
    assert sum(alpha[0]) == pytest.approx(1.0, abs=1e-4) and sum(alpha[1]) == 0.0  # last layer unconnected
    runs = mlflow_runs(uri)
    alp = runs[runs["tags.mlflow.runName"] == "distill_alp:rte"].iloc[0]
    assert alp["params.method"] == "alp"
    assert alp["params.mapping"] == "1-4→1; none→2"
    assert alp["params.weights.ce"] == "0.3"  # β = 1 − η − λ expanded and rounded, not 0.30000000000000004
    # the columns that make child runs comparable (tracking.log_training_job)
    assert alp["params.recipe"] == "ce 0.3 + kd 0.5 + layer 0.2, T=1"  # ALP-KD Eq. 2: no temperature
    assert alp["params.layer_map"] == "1-4→1; none→2"
    assert (alp["params.max_train_samples"], alp["params.max_eval_samples"]) == ("all", "all")
    assert alp["params.data.source"] == str(tiny_glue_dir.resolve())
    assert alp["params.task"] == "rte" and alp["params.seed"] == "42" and alp["tags.parameters"]
    inputs = mlflow.MlflowClient(uri).get_run(alp["run_id"]).inputs.dataset_inputs
    # the train split it learned from, and the dev split its final metrics were measured on
    assert sorted(i.dataset.name for i in inputs) == ["glue-rte-train-" + str(tiny_train_rows), "glue-rte-validation"]
    assert alp["metrics.time/training_seconds"] > 0 and alp["metrics.time/evaluation_seconds"] > 0
    assert int(alp["params.training.log_every_steps"]) == 1  # a few dozen steps: one loss point per step
    for term in ("ce", "kd", "layer", "loss"):
        assert f"metrics.train/{term}" in runs.columns and alp[f"metrics.train/{term}"] >= 0
    assert 0 <= alp["metrics.final/validation/accuracy"] <= 1
    # the teacher run (the session's stored teacher, reused) sits next to it in the same experiment
    assert (runs["tags.mlflow.runName"] == "train_teacher:rte (reused)").sum() == 1
    # students are logged too, as a LoggedModel of their run holding the store entry (weights, tokenizer)
    from bert_kd.tracking.logged_models import find_logged_model

    model_id = find_logged_model(alp["run_id"], mlflow.MlflowClient(uri))
    assert model_id == metrics["info"]["mlflow_model_id"]
    files = {a.path for a in mlflow.MlflowClient(uri).list_logged_model_artifacts(model_id, f"data/{student.name}")}
    assert {f"data/{student.name}/model.safetensors", f"data/{student.name}/tokenizer.json"} <= files
    logged = next(root.rglob(f"data/{student.name}/model.safetensors"))  # stored once: a hard link
    assert logged.stat().st_ino == (student / "model.safetensors").stat().st_ino
    # ALP-KD Figure 3: 10 random dev examples, one row each (not averaged), layer 2 marked unconnected
    figure3 = pd.read_csv(root / "data/08_reporting/alp_kd_figure3_alp.csv")
    assert figure3["example"].nunique() == 10 and len(figure3) == 10 * 4 + 10
    assert not figure3.loc[figure3["student_layer"] == 2, "connected"].any()
    assert figure3.loc[figure3["student_layer"] == 2, "alpha"].isna().all()
    assert figure3[figure3["connected"]].groupby("example")["alpha"].sum().round(4).eq(1.0).all()
    assert (root / "data/08_reporting/alp_kd_figure3_alp.png").read_bytes()[:4] == b"\x89PNG"
    parent = runs[runs["tags.mlflow.runName"] == "distill_alp:rte [kedro run]"].iloc[0]
    logged = {a.path for a in mlflow.MlflowClient(uri).list_artifacts(parent["run_id"], "figures")}
    assert {"figures/alp_attention_alp.png", "figures/alp_attention_alp.csv"} <= logged


def lineage_on_run(client, version) -> dict:
    """The tags of the run a registered version's LoggedModel came from."""
    return client.get_run(client.get_logged_model(version.source.removeprefix("models:/")).source_run_id).data.tags


def test_distill_baselines_writes_table_one(run_pipeline, capsys):
    # 2 student epochs: the two-stage TinyBERT row needs one epoch per stage (1 + 1 at fraction 0.6);
    # the session's stored teacher, reused in this run's new tracking store: the reuse run logs its
    # LoggedModel there and records its train split, so its final score names the dev split too
    outputs, root, uri = run_pipeline(
        "distill_baselines",
        student={"num_layers": 2, "training": {**TINY_TRAINING, "epochs": 2, "aux_learning_rate": 1e-3}},
    )
    terminal = capsys.readouterr().out.rstrip().splitlines()
    table = pd.read_csv(root / "data/08_reporting/distill_baselines.csv")
    rows = list(yaml.safe_load((root / "conf/base/parameters_distill.yml").read_text())["distill_methods"])
    assert rows[:10] == ["nkd", "rkd", "logits_mse", "pkd", "ckd", "ckd_po", "alp_no", "alp_po", "alp", "tinybert"]
    assert list(table["method"]) == ["teacher", "majority class", *rows]  # every recipe row, then the floor
    assert table.loc[0, "% of teacher"] == 100.0
    md = (root / "data/08_reporting/distill_baselines.md").read_text()
    assert md.startswith("| method |") or md.startswith("**No best student**")  # tiny students may all tie
    runs = mlflow_runs(uri)
    assert "tags.method" in runs.columns, sorted(runs.columns)
    methods = set(runs["tags.method"].dropna())
    # a 2-layer student: CKD-PO is CKD's job and ALP-NO / ALP-PO are ALP's (the same layers, the same weights):
    # trained once, each shown as the row it repeats
    same_job = dict(zip(table["method"], table["same job as"]))
    assert {row: same_job[row] for row in ("ckd_po", "alp_no", "alp_po")} == {
        "ckd_po": "ckd",
        "alp_no": "alp",
        "alp_po": "alp",
    }
    assert pd.isna(same_job["alp"]) and pd.isna(same_job["pkd"])
    assert set(rows) - {"ckd_po", "alp_no", "alp_po"} <= methods
    alp = table[table["method"].isin(["alp", "alp_no", "alp_po"])]
    assert alp["accuracy"].nunique() == 1
    tinybert = runs[runs["tags.mlflow.runName"] == "distill_tinybert:rte"].iloc[0]
    assert tinybert["metrics.train/stage"] == 2.0 and "pred" in tinybert["params.stages"]  # ended in stage 2
    one_stage = runs[runs["tags.mlflow.runName"] == "distill_tinybert_one_stage:rte"].iloc[0]
    assert (one_stage["params.method"], one_stage["params.algorithm"]) == ("tinybert_one_stage", "tinybert")
    # the kedro run's parent: named after pipeline and task, the comparison as description + metrics
    parent = runs[runs["tags.mlflow.runName"] == "distill_baselines:rte [kedro run]"].iloc[0]
    assert "| method |" in parent["tags.mlflow.note.content"]
    assert parent["metrics.compare/alp/accuracy"] == pytest.approx(
        table.loc[table["method"] == "alp", "accuracy"].iloc[0]
    )
    assert parent["metrics.teacher/accuracy"] == pytest.approx(table.loc[0, "accuracy"])
    assert parent["tags.teacher_run_id"]
    # tiny students: either a best student, or the note says why there is none (bert_kd.core.reports.verdict)
    if isinstance(parent.get("tags.comparison.warning"), str):
        assert pd.isna(parent.get("tags.best_method")) and "No best student" in parent["tags.mlflow.note.content"]
    else:
        assert parent["tags.best_method"] in methods
    assert parent["metrics.majority/accuracy"] == pytest.approx(table.loc[1, "accuracy"])
    shares = runs.filter(like="metrics.grad_share/").to_numpy(dtype=float).ravel()
    shares = shares[~pd.isna(shares)]
    assert len(shares) and ((shares >= 0) & (shares <= 1 + 1e-9)).all(), shares  # every student run: gradient shares
    students = runs[runs["tags.method"].isin(rows) & (runs["tags.role"] == "student")]
    reused = students.get("tags.bert_kd.reused", pd.Series(index=students.index, dtype=object)) == "true"
    assert reused.sum() == 3  # ckd_po, alp_no, alp_po: the store's student of the job they repeat
    assert students[~reused].filter(like="metrics.grad_share/").notna().any(axis=1).all()  # every training run
    assert tinybert["metrics.grad_share/stage2/pred"] == 1.0  # staged: per stage; stage 2 has one term
    # every student (and the teacher) is a LoggedModel; the best one registered unless all tie
    client = mlflow.MlflowClient(uri)
    logged = client.search_logged_models(experiment_ids=[runs["experiment_id"].iloc[0]])
    trained = [row for row in rows if row not in ("ckd_po", "alp_no", "alp_po")]  # each job trained (and logged) once
    assert sorted(m.name for m in logged) == sorted([f"{row}-rte-student" for row in trained] + ["teacher-rte"])
    assert len({m.source_run_id for m in logged}) == len(trained) + 1  # each in the run of its job
    for model in logged:  # the Models tab's Dataset column: the dev split its metrics were measured on
        assert {m.dataset_name for m in model.metrics if m.key == "final/score"} == {"glue-rte-validation"}, model.name
        assert [i.model_id for i in client.get_run(model.source_run_id).inputs.model_inputs] == [model.model_id]
    # a job's run lasts its job: at least its training seconds, and not a later job's time on top
    jobs = runs[runs["metrics.time/training_seconds"].notna()]
    assert len(jobs) == len(trained)  # the students; the teacher was reused (no training in this run)
    durations = (jobs["end_time"] - jobs["start_time"]).dt.total_seconds()
    overhead = durations - jobs["metrics.time/training_seconds"]
    assert (overhead >= 0).all() and (overhead < 30).all(), overhead.tolist()
    assert jobs["metrics.time/evaluation_seconds"].notna().all()
    registered = outputs["distill_baselines_registered_model"].load()  # a MemoryDataset
    assert parent["tags.comparison.verdict"] == registered["verdict"]
    if not registered["registered"]:  # the teacher or every student at the majority class
        assert registered["reason"] == parent["tags.comparison.warning"]
    else:
        version = client.get_model_version("bert_kd-rte-student", registered["version"])
        assert (
            version.tags["bert_kd.method"] == registered["method"]
            and "bert_kd.data_digest" not in version.tags
            and (
                lineage_on_run(client, version)["bert_kd.data_digest"]  # the lineage stays on the student's run
            )
        )
        assert parent["tags.mlflow.note.content"].startswith("**Registered")  # above the table, not behind "Show more"
        alias = "champion" if registered["verdict"] == "winner" else f"tied-{registered['method']}"
        assert client.get_model_version_by_alias("bert_kd-rte-student", alias).version == version.version
        assert "| method |" in version.description  # the comparison it was chosen from
        assert version.tags["bert_kd.verdict"] == registered["verdict"]
        if registered["verdict"] == "tie":  # each tied job under its own alias, no champion
            assert version.tags["bert_kd.tied"] == parent["tags.comparison.tied"]
            assert version.tags["bert_kd.tied"].startswith(registered["method"])
            assert "champion" not in client.get_registered_model("bert_kd-rte-student").aliases
        else:
            assert registered["method"] == parent["tags.best_method"]
    # the terminal ends with the answer: the table's file, the parent run's link, what was registered
    parent_url = f"#/experiments/{parent['experiment_id']}/runs/{parent['run_id']}?workflowType=machine_learning"
    if registered.get("decide"):  # a tie: the last line says how to decide it
        assert terminal[-1] == f"to decide the tie: {registered['decide']}"
        terminal = terminal[:-1]
    assert terminal[-3].startswith("table: ") and terminal[-3].endswith("distill_baselines.md")
    assert terminal[-2].startswith("MLflow run: ") and terminal[-2].endswith(parent_url)
    if registered.get("versions"):
        assert terminal[-1].startswith("registered, tied (no @champion): ")
    elif registered["registered"]:
        assert terminal[-1] == (
            f"registered: {registered['method']} as {registered['uri']} = models:/bert_kd-rte-student@champion"
        )
    else:
        assert terminal[-1] == f"not registered (distill_baselines): {registered['reason']}"
    assert len(list((root / "data/08_reporting/history").rglob("distill_baselines.*"))) == 3  # csv, md, png
    # ALP-KD Figure 3 for every ALP row; Figure 4: PKD's pair (bucket_first(4, 2) = [[1], []]), every
    # dev example (24 < 100) for teacher, ALP and PKD, cosine distance for the two students
    for row in ("alp_no", "alp_po", "alp"):
        assert (root / f"data/08_reporting/alp_kd_figure3_{row}.png").stat().st_size > 1000
    figure4 = pd.read_csv(root / "data/08_reporting/alp_kd_figure4.csv")
    assert set(zip(figure4["student_layer"], figure4["teacher_layer"])) == {(1, 1)}
    assert figure4.groupby("model").size().to_dict() == {"ALP": 24, "PKD": 24, "teacher": 24}
    students = figure4[figure4["model"] != "teacher"]
    assert (
        students["cosine_distance"].between(0, 2).all()
        and figure4.loc[figure4["model"] == "teacher", "cosine_distance"].isna().all()
    )
    assert (root / "data/08_reporting/alp_kd_figure4.png").stat().st_size > 1000


def test_bad_method_weight_fails_before_training(run_pipeline):
    with pytest.raises(Exception, match="distill_methods.pkd.weights.kd: Input should be greater than or equal to 0"):
        run_pipeline("distill_pkd", distill_methods={"pkd": {"method": "pkd", "weights": {"kd": -0.1, "layer": 0.2}}})
    assert mlflow.active_run() is None  # the kedro-mlflow parent run opened before the check is closed…
    statuses = set(mlflow_runs(mlflow.get_tracking_uri())["status"])
    assert "RUNNING" not in statuses  # …as FAILED (or never opened), not left RUNNING


def test_bad_recipe_is_refused_before_the_teacher_trains(run_pipeline, caplog):
    with caplog.at_level("INFO"), pytest.raises(Exception, match="distill_methods.alp.bucket: unknown key"):
        run_pipeline("distill_alp", distill_methods={"alp": {"method": "alp", "mapping": "all", "bucket": 3}})
    assert not any("Running node" in r.getMessage() for r in caplog.records)


def test_unknown_task_is_refused(run_pipeline):
    with pytest.raises(Exception, match="valid"):
        run_pipeline("train_teacher", task="sst3")


def test_student_init_pretrained_starts_from_the_teachers_checkpoint(tiny_teacher_dir):
    """student.init: pretrained copies the checkpoint the teacher was fine-tuned from (the papers' student start);
    init: teacher copies the fine-tuned teacher and keeps the job key it had before the option."""
    import torch

    from bert_kd.config.schema import Student
    from bert_kd.core.models import ModelBundle, load_classifier, load_tokenizer
    from bert_kd.experiment.training_jobs.student import build_student_model, student_start_spec

    fine_tuned = load_classifier(str(tiny_teacher_dir), 2)
    with torch.no_grad():
        for p in fine_tuned.parameters():
            p.add_(0.5)
    teacher = ModelBundle(
        fine_tuned, load_tokenizer(str(tiny_teacher_dir)), {"task": "rte", "base_model": str(tiny_teacher_dir)}
    )
    checkpoint = load_classifier(str(tiny_teacher_dir), 2)
    block = {"num_layers": 2, "layer_selection": "first"}
    pretrained = build_student_model(teacher, {**block, "init": "pretrained"}, "rte")
    copied = build_student_model(teacher, {**block, "init": "teacher"}, "rte")
    layer = lambda m: m.bert.encoder.layer[1].attention.self.query.weight  # noqa: E731
    assert torch.equal(layer(pretrained.model), layer(checkpoint))
    assert torch.equal(layer(copied.model), layer(fine_tuned))
    assert torch.equal(copied.model.classifier.weight, fine_tuned.classifier.weight)
    assert not torch.equal(pretrained.model.classifier.weight, fine_tuned.classifier.weight)
    explicit_teacher, implicit = Student(**block, init="teacher"), Student(**block)
    assert student_start_spec(copied, explicit_teacher) == student_start_spec(copied, implicit)
    assert student_start_spec(pretrained, Student(**block, init="pretrained"))["init"] == "pretrained"
    with pytest.raises(ValueError, match="base_model"):
        build_student_model(
            ModelBundle(fine_tuned, teacher.tokenizer, {"task": "rte"}), {**block, "init": "pretrained"}, "rte"
        )


@pytest.mark.parametrize(
    ("module", "args", "prefix"),
    [
        ("distill", ({"alp": {"method": "alp"}, "pkd": {"method": "pkd"}},), "distill_baselines"),
        ("ted", (), "distill_ted_baselines"),
        ("multi_teacher", (), "distill_multi_teacher_baselines"),
    ],
)
def test_comparison_nodes_sit_in_the_compare_group_and_keep_their_dataset_names(module, args, prefix):
    """kedro-viz groups the table/plot/registration nodes under ``compare``; the catalog's names stay. The
    students' evaluations are gathered in the paper's group into ``<prefix>_evaluations``, the one input
    (besides the teacher's metrics and the run settings) that the compare group reads."""
    import importlib

    pipe = importlib.import_module(f"bert_kd.pipelines.{module}.pipeline").create_pipeline(*args)
    compare = [n for n in pipe.nodes if n.namespace == "compare"]
    assert len(compare) == 2 and all(n.name.startswith("compare.") for n in compare)
    outputs = set().union(*(n.outputs for n in compare))
    assert outputs == {f"{prefix}_{suffix}" for suffix in ("table", "table_md", "plot", "registered_model")}
    inputs = set().union(*(n.inputs for n in compare))
    assert not [name for name in inputs if name.startswith("compare.")] and "run_settings" in inputs
    assert not [name for name in inputs if name.endswith(".student_metrics")] and f"{prefix}_evaluations" in inputs
    gather = next(n for n in pipe.nodes if f"{prefix}_evaluations" in n.outputs)
    assert gather.namespace == module.replace("distill", "alp_kd") and gather.name.endswith(".gather_students")
    consumed = {f"{prefix}_table"}  # read by the register node
    assert pipe.outputs() >= outputs - consumed  # nothing renamed under compare reaches the catalog


@pytest.mark.parametrize("rows", [1, 3, 6, 7, 11, 40])
def test_a_comparisons_students_are_gathered_six_at_most_per_node_in_order(rows):
    """Any number of rows reaches the compare node as one list in the rows' order, no node reading more
    than six inputs: one node up to six rows, then groups of near-equal size (11 rows: 6 and 5) and a join."""
    from bert_kd.pipelines.distill.pipeline import gathering_pipeline

    names = [f"alp_kd.row{i}.student_metrics" for i in range(rows)]
    pipe = gathering_pipeline(names, "distill_baselines_evaluations", "alp_kd")
    assert all(len(n.inputs) <= 6 and n.namespace == "alp_kd" for n in pipe.nodes)
    assert pipe.inputs() == set(names) and pipe.outputs() == {"distill_baselines_evaluations"}
    if rows == 11:
        assert sorted(len(n.inputs) for n in pipe.nodes) == [2, 5, 6]
    data = {name: {"row": i} for i, name in enumerate(names)}
    for node in pipe.nodes:  # topologically sorted
        data.update(node.run({name: data[name] for name in node.inputs}))
    assert data["distill_baselines_evaluations"] == [{"row": i} for i in range(rows)]


def test_a_teacher_cache_entry_stored_as_one_torch_file_still_loads(tmp_path):
    """Entries stored before the cache was memory-mapped hold one ``teacher_cache.pt``: read whole, as then."""
    import torch

    from bert_kd.pipelines.distill.nodes import LEGACY_CACHE_FILE, load_cache_entry

    logits, cls, row_of_idx = torch.randn(3, 2), torch.randn(3, 4, 8), torch.tensor([2, 0, 1])
    torch.save({"logits": logits, "cls": cls, "row_of_idx": row_of_idx}, tmp_path / LEGACY_CACHE_FILE)
    cache = load_cache_entry(tmp_path, "k")
    assert cache.key == "k" and cache.directory is None
    torch.testing.assert_close(cache.lookup(torch.tensor([0])).logits, logits[2:3], rtol=0, atol=0)
