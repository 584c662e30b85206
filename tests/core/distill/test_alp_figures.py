"""ALP-KD Figures 3 and 4 from tiny models: per-example α, unconnected layers, PCA + cosine distance."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bert_kd.core.distill.alp_figures import (
    alp_attention_figure,
    alp_attention_per_example,
    layer_alignment,
    layer_alignment_figure,
    save_figure,
)
from bert_kd.core.models import build_student, load_classifier, load_tokenizer
from tests.conftest import WORDS


@pytest.fixture(scope="module")
def models(tiny_teacher_dir):
    torch.manual_seed(0)
    teacher = load_classifier(str(tiny_teacher_dir), 2).eval()
    students = {name: build_student(teacher, 2, "first")[0] for name in ("ALP", "PKD")}
    with torch.no_grad():  # make the two students differ
        for p in students["PKD"].parameters():
            p.add_(0.05 * torch.randn_like(p))
    return teacher, students


@pytest.fixture(scope="module")
def batch(tiny_teacher_dir):
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(WORDS, size=6)) for _ in range(30)]
    return dict(load_tokenizer(str(tiny_teacher_dir))(texts, padding=True, return_tensors="pt"))


def test_figure3_alpha_per_example_rows_sum_to_one_and_unconnected_layer_is_nan(models, batch, tmp_path):
    teacher, students = models
    result = alp_attention_per_example(students["ALP"], teacher, batch, "all", n_examples=10, seed=1)
    assert result.alpha.shape == (10, 2, 4) and len(set(result.examples)) == 10
    assert result.connected == [True, False]
    np.testing.assert_allclose(result.alpha[:, 0].sum(axis=1), 1.0, atol=1e-5)
    assert np.isnan(result.alpha[:, 1]).all()  # not drawn as zeros
    assert not np.allclose(result.alpha[0, 0], result.alpha[1, 0])  # per example, not averaged
    path = tmp_path / "figure3.png"
    save_figure(alp_attention_figure(result), path)
    assert path.read_bytes()[:4] == b"\x89PNG" and not list(tmp_path.glob(".*partial"))


def test_figure3_alpha_is_computed_on_the_students_device_when_the_teacher_is_elsewhere(models, batch, monkeypatch):
    """On a GPU machine the trained student and its live teacher sat on different devices, and Figure 3 failed in
    α's einsum. The meta device stands in for the student's device here (a tensor can move to it, not from it)."""
    import bert_kd.core.distill.alp_figures as figures

    teacher, students = models
    real_states, real_alp = figures.layer_states, figures.alp_attention
    seen: list[tuple[str, str]] = []

    def states(model, sub, prefix=""):
        out = real_states(model, sub, prefix)
        return out if model is teacher else out.to("meta")

    def alp(student_cls, teacher_cls, mapping, *score):
        seen.append((student_cls.device.type, teacher_cls.device.type))
        real = real_states(teacher, batch)[: student_cls.shape[0]]
        return real_alp(real[:, :2], real, mapping, *score)

    monkeypatch.setattr(figures, "layer_states", states)
    monkeypatch.setattr(figures, "alp_attention", alp)
    result = alp_attention_per_example(students["ALP"], teacher, batch, "all", n_examples=4, seed=1)
    assert seen == [("meta", "meta")] and result.alpha.shape == (4, 2, 4)


def test_figure4_pca_and_cosine_distance(models, batch, tmp_path):
    teacher, students = models
    alignments = layer_alignment(teacher, students, batch, [(1, 1), (1, 3)], n_examples=20)
    assert [(a.student_layer, a.teacher_layer) for a in alignments] == [(1, 1), (1, 3)]
    first = alignments[0]
    assert set(first.points) == {"teacher", "ALP", "PKD"} and first.points["teacher"].shape == (20, 2)
    # the ALP student is an exact copy of the teacher's first layer: distance 0 at (1, 1)
    np.testing.assert_allclose(first.cosine_distance["ALP"], 0.0, atol=1e-6)
    assert (first.cosine_distance["PKD"] > 1e-4).all()
    path = tmp_path / "figure4.png"
    save_figure(layer_alignment_figure(alignments), path)
    assert path.stat().st_size > 1000
    with pytest.raises(ValueError, match="teacher layer 9 outside 1..4"):
        layer_alignment(teacher, students, batch, [(1, 9)], n_examples=5)


def test_dev_examples_collates_only_the_drawn_rows(rte):
    from bert_kd.core.distill.alp_figures import dev_examples

    _, datasets, collator = rte
    batch, index = dev_examples(datasets["validation"], 5, collator, seed=3)
    assert batch["input_ids"].shape[0] == 5 and len(set(index)) == 5 and list(index) == sorted(index)
    assert batch["idx"].tolist() == [datasets["validation"][int(i)]["idx"] for i in index]
    _, everything = dev_examples(datasets["validation"], 1000, collator)
    assert list(everything) == list(range(len(datasets["validation"])))


def test_tables_list_unconnected_layers_and_every_pca_point(models, batch):
    from bert_kd.core.distill.alp_figures import alignment_pairs, alignment_table, alpha_table

    teacher, students = models
    result = alp_attention_per_example(students["ALP"], teacher, batch, "all", n_examples=3)
    table = alpha_table(result)
    assert len(table) == 3 * 4 + 3  # 4 teacher layers for layer 1, one "not connected" row for layer 2
    unconnected = table[table["student_layer"] == 2]
    assert (~unconnected["connected"]).all() and unconnected["alpha"].isna().all()
    assert table.groupby("example")["alpha"].sum().round(5).eq(1.0).all()
    connected = table[table["connected"]]
    np.testing.assert_allclose(connected["normalised_entropy"], connected["entropy"] / np.log(4), atol=1e-5)
    (summary,) = result.summary().to_dict("records")  # the connected layer only
    assert summary["student_layer"] == 1 and summary["examples"] == 3
    assert summary["mean_normalised_entropy"] == pytest.approx(connected["normalised_entropy"].mean(), abs=1e-4)
    sd = connected.pivot(index="example", columns="teacher_layer", values="alpha").std(ddof=0).max()
    assert summary["alpha_sd_across_examples_max"] == pytest.approx(sd, abs=1e-4) and sd > 0
    alignments = layer_alignment(teacher, students, batch, [(1, 1)], n_examples=7)
    points = alignment_table(alignments, examples=list(range(100, 107)))
    assert len(points) == 3 * 7 and set(points["example"]) == set(range(100, 107))
    assert points.loc[points["model"] == "teacher", "cosine_distance"].isna().all()
    assert alignment_pairs([[1], [5], [9], []]) == [(1, 1), (2, 5), (3, 9)]
    assert alignment_pairs([[1, 2], [3]]) == [(2, 3)]
