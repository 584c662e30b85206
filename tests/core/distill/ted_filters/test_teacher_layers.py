"""TED's M(·) (bert_kd.core.distill.ted_filters.teacher_layers)."""

from __future__ import annotations

import pytest

from bert_kd.core.distill.ted_filters import ted_layer_map


def test_ted_layer_map_default_and_errors():
    assert ted_layer_map("distilbert", 12, 6) == [1, 3, 5, 8, 10, 12]
    assert ted_layer_map("distilbert", 4, 2) == [1, 4]
    assert ted_layer_map([2, 4], 4, 2) == [2, 4]
    assert ted_layer_map([[2], [3]], 4, 2) == [2, 3]
    with pytest.raises(ValueError, match="exactly one teacher layer"):
        ted_layer_map("buckets_no", 4, 2)  # last student layer unconnected
    with pytest.raises(ValueError, match="outside 1..4"):
        ted_layer_map([1, 5], 4, 2)
