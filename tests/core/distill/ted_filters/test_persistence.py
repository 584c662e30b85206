"""TED filters on disk: round trip, provenance, atomic writes (bert_kd.core.distill.ted_filters.persistence)."""

from __future__ import annotations

import pytest
import torch

from bert_kd.core.distill.ted_filters import TaskFilters
from bert_kd.core.models import parameters_fingerprint
from tests.core.distill.ted_filters.helpers import identical, snapshot, tiny_bert


@pytest.mark.parametrize("arch", ["linear", "subsequent_layer"])
def test_save_load_roundtrip_and_provenance(tmp_path, arch):
    teacher = tiny_bert()
    filters = TaskFilters.build(teacher, [1, 4], arch, task="RTE")
    filters.info["note"] = "x"
    path = filters.save(tmp_path / "filters")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["filters"]  # no temporary directory left
    loaded = TaskFilters.load(path)
    assert loaded.config == filters.config
    assert loaded.info == {"note": "x"}
    assert identical(snapshot(filters), loaded)
    hidden = tuple(torch.randn(2, 4, 8) for _ in range(5))
    mask = torch.ones(2, 4)
    filters.eval(), loaded.eval()
    for a, b in zip(filters(hidden, mask), loaded(hidden, mask)):
        assert torch.allclose(a, b)

    fp = parameters_fingerprint(teacher)
    assert loaded.task == "rte" and loaded.fingerprint == fp
    assert loaded.check_compatible("rte", fp) == []
    with pytest.raises(ValueError, match="trained for task 'rte', not 'sst2'"):
        loaded.check_compatible("sst-2", fp)
    other = tiny_bert(seed=1)
    with pytest.raises(ValueError, match="fingerprint"):
        loaded.check_compatible("rte", parameters_fingerprint(other))
    problems = loaded.check_compatible("sst2", parameters_fingerprint(other), allow_mismatch=True)
    assert len(problems) == 2
    with pytest.raises(FileNotFoundError):
        TaskFilters.load(tmp_path / "nowhere")
