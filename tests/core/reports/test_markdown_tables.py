"""bert_kd.core.reports.markdown_tables: the one Markdown table renderer (comparison, latency, sweep tables)."""

import math

import pandas as pd
import pytest

from bert_kd.core.reports.markdown_tables import markdown_table


def test_a_frame_renders_header_rule_and_rows_with_empty_missing_cells():
    frame = pd.DataFrame(
        [
            {"method": "teacher", "accuracy": 0.9, "% of teacher": 100.0},
            {"method": "alp", "accuracy": 0.5631, "% of teacher": None},
        ]
    )
    assert markdown_table(frame) == (
        "| method | accuracy | % of teacher |\n|---|---|---|\n| teacher | 0.9 | 100.0 |\n| alp | 0.5631 |  |\n"
    )


def test_row_dicts_take_every_key_in_first_seen_order():
    rows = [{"model": "a", "batch_size": 1}, {"model": "b", "dev_score": math.nan, "batch_size": 4, "note": None}]
    assert markdown_table(rows) == (
        "| model | batch_size | dev_score | note |\n|---|---|---|---|\n| a | 1 |  |  |\n| b | 4 |  |  |\n"
    )
    assert markdown_table(rows, ["batch_size", "model"]) == "| batch_size | model |\n|---|---|\n| 1 | a |\n| 4 | b |\n"


def test_a_pipe_or_line_break_in_a_cell_does_not_split_the_cell_or_the_row():
    text = markdown_table([{"teachers": "a|b", "note": "two\nlines", "x|y": 1}])
    assert text == "| teachers | note | x\\|y |\n|---|---|---|\n| a\\|b | two<br>lines | 1 |\n"
    header, rule, row = text.splitlines()
    unescaped_pipes = [line.replace("\\|", "").count("|") for line in (header, rule, row)]
    assert unescaped_pipes == [4, 4, 4]


def test_alignment_rules_and_a_bad_alignment_names_the_column():
    frame = pd.DataFrame({"Model": ["Teacher"], "RTE": ["66.06"], "Average": ["66.06"], "n": [3]}).set_index("Model")
    text = markdown_table(frame.reset_index(), align={"RTE": "right", "Average": "center", "n": "left"})
    assert text.splitlines()[:2] == ["| Model | RTE | Average | n |", "|---|---:|:---:|:---|"]
    with pytest.raises(ValueError, match="'RTE': 'rigth'"):
        markdown_table(frame, align={"RTE": "rigth"})


def test_nothing_to_show_is_an_empty_string_and_a_frame_without_rows_keeps_its_header():
    assert markdown_table([]) == ""
    assert markdown_table(pd.DataFrame()) == ""
    assert markdown_table(pd.DataFrame(columns=["method", "accuracy"])) == "| method | accuracy |\n|---|---|\n"


def test_rounded_halves_up_from_a_four_decimal_table_value():
    from bert_kd.core.reports.markdown_tables import rounded

    assert (rounded(0.7775, 3), rounded(0.7798, 3), rounded(52.94, 0), rounded(15.616, 2)) == (
        "0.778",
        "0.780",
        "53",
        "15.62",
    )
