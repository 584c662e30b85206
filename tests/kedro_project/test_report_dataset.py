import pandas as pd
import pytest

from bert_kd.kedro_project import report_dataset as reporting
from bert_kd.kedro_project.report_dataset import ReportDataset


@pytest.fixture(autouse=True)
def fresh_stamp(monkeypatch):
    monkeypatch.setattr(reporting, "_RUN_STAMP", None)


def test_latest_at_fixed_path_and_every_save_kept(tmp_path, monkeypatch):
    csv = ReportDataset(str(tmp_path / "distill_baselines.csv"), "pandas.CSVDataset")
    md = ReportDataset(str(tmp_path / "distill_baselines.md"), {"type": "text.TextDataset"})
    csv.save(pd.DataFrame({"method": ["alp"], "accuracy": [0.56]}))
    md.save("| method |\n")
    first_run = reporting.run_stamp()
    assert sorted(p.name for p in (tmp_path / "history" / first_run).iterdir()) == [
        "distill_baselines.csv",
        "distill_baselines.md",
    ]  # .md and .csv alike, one folder per run

    monkeypatch.setattr(reporting, "_RUN_STAMP", "2099-01-01T00.00.00.000Z")  # a later kedro run
    csv.save(pd.DataFrame({"method": ["pkd"], "accuracy": [0.55]}))
    assert list(csv.load()["method"]) == ["pkd"]  # the fixed path holds the latest
    assert list(pd.read_csv(tmp_path / "history" / first_run / "distill_baselines.csv")["method"]) == ["alp"]
    assert (tmp_path / "history" / "2099-01-01T00.00.00.000Z" / "distill_baselines.csv").is_file()
    assert not list(tmp_path.glob(".*.partial"))


def test_second_save_in_one_run_does_not_overwrite_history(tmp_path):
    text = ReportDataset(str(tmp_path / "t.md"), "text.TextDataset")
    text.save("one")
    text.save("two")
    kept = sorted(p.read_text() for p in (tmp_path / "history").rglob("t.md"))
    assert kept == ["one", "two"] and text.load() == "two"


def test_old_versioned_folder_is_moved_into_history(tmp_path):
    old = tmp_path / "table.csv" / "2025-01-01T00.00.00.000Z"
    old.mkdir(parents=True)
    (old / "table.csv").write_text("method\nnkd\n")
    ReportDataset(str(tmp_path / "table.csv"), "pandas.CSVDataset").save(pd.DataFrame({"method": ["alp"]}))
    assert (tmp_path / "table.csv").is_file()
    assert (tmp_path / "history" / "kedro_versions" / "table.csv" / "2025-01-01T00.00.00.000Z" / "table.csv").is_file()


def test_missing_latest_and_bad_config_name_the_file(tmp_path):
    with pytest.raises(Exception, match="does not exist yet"):
        ReportDataset(str(tmp_path / "x.csv"), "pandas.CSVDataset").load()
    with pytest.raises(ValueError, match="needs a 'type'"):
        ReportDataset(str(tmp_path / "x.csv"), {"load_args": {}})


def test_plots_are_reported_the_same_way(tmp_path):
    import matplotlib.pyplot as plt

    fig, _ = plt.subplots()
    ReportDataset(str(tmp_path / "p.png"), "matplotlib.MatplotlibDataset").save(fig)
    plt.close(fig)
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
    assert len(list((tmp_path / "history").rglob("p.png"))) == 1


def test_a_figure_and_its_table_are_one_dataset_written_as_csv_and_png(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bert_kd.kedro_project.report_dataset import ReportFigureDataset

    figure, axes = plt.subplots()
    axes.plot([0, 1], [1, 0])
    dataset = ReportFigureDataset(str(tmp_path / "alp_kd_figure4"))
    assert not dataset.exists()
    dataset.save((pd.DataFrame({"layer": [1, 2]}), figure))
    assert (tmp_path / "alp_kd_figure4.png").stat().st_size > 1000 and dataset.exists()
    assert list(dataset.load()["layer"]) == [1, 2]
    with pytest.raises(Exception, match="saved as \\(table, figure\\)"):
        dataset.save(figure)
