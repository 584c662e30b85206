"""TED filter modules: architectures, widths, copies for the student (bert_kd.core.distill.ted_filters.filters)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from bert_kd.core.distill.ted_filters import TaskFilters
from tests.core.distill.ted_filters.helpers import tiny_bert


@pytest.mark.parametrize("arch", ["linear", "mlp", "subsequent_layer"])
def test_filter_architectures_shapes(arch):
    teacher = tiny_bert(hidden=8)
    filters = TaskFilters.build(teacher, [1, 4], arch, out_width=12, task="rte")
    assert filters.in_width == 8 and filters.out_width == 12 and filters.num_labels == 2
    hidden = tuple(torch.randn(3, 5, 8) for _ in range(5))
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 0, 0, 0]])
    filtered = filters.filtered(hidden, mask)
    assert [tuple(f.shape) for f in filtered] == [(3, 5, 12)] * 2
    assert [tuple(l.shape) for l in filters(hidden, mask)] == [(3, 2)] * 2


def test_subsequent_layer_copies_next_layer_and_last_itself():
    teacher = tiny_bert(layers=4)
    stack = teacher.bert.encoder.layer
    filters = TaskFilters.build(teacher, [1, 4], "subsequent_layer")
    for k, source in ((0, stack[1]), (1, stack[3])):  # layer 1 -> layer 2, last layer -> itself
        copied = filters.filters[k].layer.state_dict()
        assert all(torch.equal(copied[n], t) for n, t in source.state_dict().items())
        assert filters.filters[k].layer is not source
    assert isinstance(filters.filters[0].body, nn.Identity)  # equal widths: no projection


def test_filter_width_and_depth_errors():
    teacher = tiny_bert(hidden=8)
    with pytest.raises(ValueError, match="outside the model's transformer layers 1..4"):
        TaskFilters.build(teacher, [1, 5])
    filters = TaskFilters.build(teacher, [1, 4])
    wide = tiny_bert(hidden=12, heads=2)
    with pytest.raises(ValueError, match="width 8 .* width 12"):
        filters.check_model(wide)
    with pytest.raises(ValueError, match="expects width 8"):
        filters.filtered(tuple(torch.randn(1, 3, 12) for _ in range(5)))
    shallow = tiny_bert(layers=2)
    with pytest.raises(ValueError, match="outside the teacher's transformer layers 1..2"):
        filters.check_model(shallow, "teacher")
    with pytest.raises(ValueError, match="unknown filter architecture"):
        TaskFilters.build(teacher, [1], "conv")
