"""PKD, CKD and ALP with the layer maps of ALP-KD Tables 1 and 3 (methods.layerwise)."""

from __future__ import annotations

import pytest
import torch

from bert_kd.core.distill import losses
from bert_kd.core.distill.methods import build_method
from bert_kd.core.distill.methods.base import check_method_config
from bert_kd.core.distill.outputs import Features
from tests.conftest import REPO_ROOT
from tests.core.distill.ted_filters.helpers import tiny_bert

#: Teacher layers each connected student layer reads, per Table 1 row, for a 12-layer teacher
#: and a 4-layer student (ALP-KD Sec. 4); the 4th student layer is unconnected in every row.
TABLE1_12_TO_4 = {
    "pkd": [[1], [5], [9], []],
    "ckd_no": [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], []],
    "ckd_po": [[1, 2, 3, 4, 5], [5, 6, 7, 8, 9], [9, 10, 11, 12], []],
    "alp_no": [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], []],
    "alp_po": [[1, 2, 3, 4, 5], [5, 6, 7, 8, 9], [9, 10, 11, 12], []],
    "alp": [list(range(1, 13))] * 3 + [[]],
}


def table_recipe(table: str, row: str) -> dict:
    """The recipe of ``row`` of sweep table ``table`` (``parameters_reproduce.yml``): the referenced
    ``distill_methods`` recipe with the row's ``set`` applied, as the sweep builds it."""
    import yaml

    from bert_kd.sweeps.spec import build_sweep

    conf = REPO_ROOT / "conf" / "base"
    reproduce = yaml.safe_load((conf / "parameters_reproduce.yml").read_text())["reproduce"]
    recipes = yaml.safe_load((conf / "parameters_distill.yml").read_text())
    return dict(build_sweep({**reproduce, "table": table, "methods": row}, recipes).method(row).recipe)


@pytest.fixture(scope="module")
def models():
    return tiny_bert(layers=12, hidden=8), tiny_bert(layers=4, hidden=8, seed=1), tiny_bert(layers=2, hidden=8, seed=2)


@pytest.mark.parametrize("row", sorted(TABLE1_12_TO_4))
def test_table1_rows_build_with_the_papers_maps(models, row):
    teacher, student, _ = models
    method = build_method(table_recipe("alp_kd_table1", row), student, [teacher])
    assert method.mapping == TABLE1_12_TO_4[row]
    assert method.connected == [1, 2, 3]
    if method.name == "ckd":  # one combiner per bucket, reading the concatenated bucket
        assert [method.combiners[str(j)].in_features for j in (1, 2, 3)] == [
            8 * len(b) for b in TABLE1_12_TO_4[row][:3]
        ]


@pytest.mark.parametrize("row, layer", [("pkd_1", 1), ("pkd_6", 6), ("pkd_12", 12)])
def test_table3_pkd_rows_read_one_teacher_layer(models, row, layer):
    teacher, _, student = models
    method = build_method(table_recipe("alp_kd_table3", row), student, [teacher])
    assert method.mapping == [[layer], []]
    g = torch.Generator().manual_seed(0)
    s_cls, t_cls = torch.randn(3, 3, 8, generator=g), torch.randn(3, 13, 8, generator=g)
    s = Features(logits=torch.zeros(3, 2), attention_mask=torch.ones(3, 1), extras={"cls": s_cls})
    t = Features(logits=torch.zeros(3, 2), attention_mask=torch.ones(3, 1), extras={"cls": t_cls})
    term = method.terms(s, {0: t}, {"labels": torch.tensor([0, 1, 0])})["layer"]
    assert term.item() == pytest.approx(losses.pkd_loss(s_cls[:, 1:2], t_cls[:, layer : layer + 1]).item(), rel=1e-6)


def test_alp_no_attends_only_inside_each_bucket(models):
    teacher, student, _ = models
    method = build_method({"method": "alp", "mapping": "buckets_no"}, student, [teacher])
    g = torch.Generator().manual_seed(1)
    alpha = losses.alp_attention(torch.randn(2, 4, 8, generator=g), torch.randn(2, 12, 8, generator=g), method.mapping)
    for j, bucket in enumerate(TABLE1_12_TO_4["alp_no"]):
        outside = [k for k in range(12) if k + 1 not in bucket]
        assert torch.all(alpha[:, j, outside] == 0)
        if bucket:
            assert torch.allclose(alpha[:, j].sum(-1), torch.ones(2))


def test_sun_et_al_skip_map_stays_the_pkd_default(models):
    teacher, student, _ = models
    assert build_method({"method": "pkd"}, student, [teacher]).mapping == [[3], [6], [9], []]


def test_mapping_typos_fail_before_any_model():
    assert check_method_config(table_recipe("alp_kd_table3", "pkd_6"))["layer"] > 0
    with pytest.raises(ValueError, match="unknown layer-mapping strategy 'bucket_frist'"):
        check_method_config({"method": "pkd", "mapping": "bucket_frist"})
