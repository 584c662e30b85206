"""The ALP-variant reading puts a variant row's trials in place of v2's ALP and keeps every other row."""

from __future__ import annotations

from pathlib import Path

import pytest

from bert_kd.analysis import alp_variants


def test_a_variant_row_stands_for_alp_and_the_other_rows_stay():
    base = {("alp", "mrpc"): {1: "raw"}, ("nkd", "mrpc"): {1: "n"}, ("alp", "sst2"): {1: "raw"}}
    variant = {("alp_scaled", "mrpc"): {1: "scaled", 2: "scaled"}, ("alp_cosine", "mrpc"): {1: "cos"}}
    assert alp_variants.variant_rows(variant) == ["alp_cosine", "alp_scaled"]
    out = alp_variants.substituted(base, variant, "alp_scaled")
    assert out == {("nkd", "mrpc"): {1: "n"}, ("alp", "mrpc"): {1: "scaled", 2: "scaled"}}  # no raw ALP left
    assert alp_variants.default_base(Path("results/cpu_protocol_v2_alpha")).name == "cpu_protocol_v2"


@pytest.mark.slow  # 100,000 paired resamples per claim, ~40 s
def test_the_committed_reading_is_what_the_trials_give():
    """Commit new trials of the variant table and its reading together: `bert-kd results render <folder>`."""
    from bert_kd.analysis import statistics as st
    from bert_kd.analysis.cli import command_line

    root = Path(__file__).resolve().parents[2]
    folder = Path("results/cpu_protocol_v2_alpha")
    command = command_line("render", folder, st.RESAMPLES)
    made = alp_variants.render(root / folder, root / alp_variants.default_base(folder), st.RESAMPLES, command)
    assert made == (root / folder / "tables" / "reading.md").read_text(encoding="utf-8")
