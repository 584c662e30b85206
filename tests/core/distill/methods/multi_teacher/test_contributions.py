"""Per-teacher / per-group shares of the MT loss: the pieces add up to the training loss."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bert_kd.core.distill.methods.multi_teacher.build_objective import build_multi_teacher_objective
from bert_kd.core.distill.methods.multi_teacher.contributions import (
    contributions_figure,
    contributions_table,
    dev_contributions,
)
from bert_kd.core.training import make_loader


@pytest.fixture(scope="module")
def contributions(hetero):
    torch.manual_seed(0)
    objective = build_multi_teacher_objective(
        hetero.student(),
        hetero.teachers[:2],
        {"method": "multi_teacher", "alpha": 0.2, "beta": 0.5, "temperature": 2.0},
    )
    dev = hetero.ds["validation"]
    loader = make_loader(dev, len(dev), hetero.collator, shuffle=False)  # one batch: the loss is the mean
    result = dev_contributions(objective, loader)
    objective.eval()
    with torch.no_grad():
        loss = float(objective.training_step(next(iter(loader)))["loss"])
    return result, loss, objective


def test_pieces_add_up_to_the_training_loss(contributions):
    result, loss, _ = contributions
    assert result["examples"] == 16
    assert result["total"] == pytest.approx(loss, rel=1e-5)
    assert sum(r["loss"] for r in result["rows"]) == pytest.approx(loss, rel=1e-5)


def test_one_row_per_teacher_and_group_attention_for_token_and_span_aligned_teachers(contributions):
    result, _, objective = contributions
    rows = result["rows"]
    names = objective.method.teacher_names
    hidden = [(r["teacher"], r["student_layer"], r["teacher_layers"]) for r in rows if r["term"] == "hidden"]
    # student N=2; teacher 0 has 4 layers → groups [1,2],[3,4]; teacher 1 (RoBERTa) 3 layers → [1,2],[3]
    assert hidden == [(names[0], 1, [1, 2]), (names[0], 2, [3, 4]), (names[1], 1, [1, 2]), (names[1], 2, [3])]
    attention = {r["teacher"] for r in rows if r["term"] == "attn"}
    assert attention == {names[0], names[1]}  # the BPE teacher on shared spans (alignment: token)
    assert [r["teacher"] for r in rows if r["term"] == "pred"] == names
    assert [r["term"] for r in rows if r["teacher"] is None] == ["ce"]


def test_sentence_alignment_leaves_out_the_attention_of_other_tokenizers(hetero):
    objective = build_multi_teacher_objective(
        hetero.student(), hetero.teachers[:2], {"method": "multi_teacher", "alignment": "sentence"}
    )
    dev = hetero.ds["validation"]
    result = dev_contributions(objective, make_loader(dev, len(dev), hetero.collator, shuffle=False))
    assert not [r for r in result["rows"] if r["term"] == "attn"]


def test_table_shares_sum_to_100_and_figure(contributions, tmp_path):
    result, _, objective = contributions
    table = contributions_table(result)
    assert table["share_%"].sum() == pytest.approx(100.0, abs=0.05)
    assert list(table.loc[table["term"] == "hidden", "teacher_layers"])[:2] == ["1-2", "3-4"]
    figure = contributions_figure(table, "test")
    left, right = figure.axes[:2]
    assert len(left.get_xticklabels()) == 1 + len(objective.method.teacher_names)  # student CE + one bar per teacher
    grid = right.get_images()[0].get_array()
    assert grid.shape == (2, 2) and np.isfinite(np.asarray(grid)).all()
    figure.savefig(tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 1000


def test_other_methods_are_refused(hetero):
    objective = build_multi_teacher_objective(hetero.student(), hetero.teachers[:1], {"method": "okd"})
    with pytest.raises(TypeError, match="method 'multi_teacher'"):
        dev_contributions(objective, [])
