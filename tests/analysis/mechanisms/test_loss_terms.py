"""The mechanism checks that read a method's loss terms on planted features (PKD, TED, the one-to-many mapping):
each holds, and a planted break of its mechanism makes its line fail."""

from __future__ import annotations

from bert_kd.analysis.mechanisms import layerwise, one_to_many, ted
from bert_kd.core.distill import losses
from bert_kd.core.distill.ted_filters import TaskFilters


def test_pkd_compares_mapped_layers_after_normalisation():
    (result,) = layerwise.check()
    assert result.holds, result


def test_pkd_without_its_normalisation_fails_the_check(monkeypatch):
    monkeypatch.setattr(losses, "pkd_loss", lambda s, t: ((s - t) ** 2).mean())
    (result,) = layerwise.check()
    assert not result.holds and result.measured["layer_term_mapped_layers_scaled"] > 1.0


def test_ted_distils_only_what_its_filters_keep():
    (result,) = ted.check()
    assert result.holds, result


def test_ted_without_its_filters_fails_the_check(monkeypatch):
    monkeypatch.setattr(TaskFilters, "filtered", lambda self, states, mask=None: [states[k] for k in self.layers])
    (result,) = ted.check()
    assert not result.holds and result.measured["ted_distance_dropped_half"] > 0.1


def test_each_student_layer_learns_its_groups_mean():
    (result,) = one_to_many.check()
    assert result.holds, result


def test_a_one_to_one_mapping_in_place_of_the_groups_fails_the_check(monkeypatch):
    group_mean_mse = losses.group_mean_mse

    def first_of_each_group(s_states, t_states, groups, mask, **kwargs):
        return group_mean_mse(s_states, t_states, [group[:1] for group in groups], mask, **kwargs)

    monkeypatch.setattr(losses, "group_mean_mse", first_of_each_group)
    (result,) = one_to_many.check()
    assert not result.holds and result.measured["largest_gap_to_group_mean"] > 0.05
