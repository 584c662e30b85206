"""Reporting files: the latest of each at a fixed path, every earlier one kept.

``data/08_reporting/distill_baselines.csv`` is always the newest table (open it, link it, diff it);
each save also lands in ``data/08_reporting/history/<timestamp>/distill_baselines.csv``, one folder
per ``kedro run`` holding everything that run reported (``.csv``, ``.md`` and ``.png`` alike).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from kedro.io import AbstractDataset
from kedro.io.core import generate_timestamp

from bert_kd.core.files import write_file_atomically

log = logging.getLogger(__name__)

#: One history folder per process (= per ``kedro run``), so a run's table, Markdown and plot sit
#: side by side.
_RUN_STAMP: str | None = None


def run_stamp() -> str:
    """This process's history folder: a Kedro timestamp with a per-run unique part."""
    global _RUN_STAMP
    if _RUN_STAMP is None:
        from bert_kd.kedro_project.session import unique_version

        _RUN_STAMP = unique_version()  # two runs started in the same millisecond get their own folder
    return _RUN_STAMP


class ReportDataset(AbstractDataset):
    """Save with any Kedro dataset (``dataset: pandas.CSVDataset``, ``text.TextDataset``,
    ``matplotlib.MatplotlibDataset`` …) to ``history/<run>/<name>`` first, then copy it atomically
    to ``filepath``; load reads ``filepath`` (the latest).

    A ``filepath`` left as a directory by Kedro's ``versioned: true`` layout is moved into
    ``history/`` on the first save, so older results are kept, not overwritten.
    """

    def __init__(
        self, filepath: str, dataset: str | dict, history_dir: str | None = None, metadata: dict[str, Any] | None = None
    ):
        self._filepath = Path(filepath)
        self._history_dir = Path(history_dir) if history_dir else self._filepath.parent / "history"
        self._dataset_config = {"type": dataset} if isinstance(dataset, str) else dict(dataset)
        if "type" not in self._dataset_config:
            raise ValueError(f"ReportDataset {filepath}: 'dataset' needs a 'type' (e.g. pandas.CSVDataset)")
        self.metadata = metadata

    def _inner(self, path: Path) -> AbstractDataset:
        return AbstractDataset.from_config(path.name, {**self._dataset_config, "filepath": str(path)})

    def history_path(self) -> Path:
        """Where this run's copy goes (a new folder if this run already saved this name)."""
        path = self._history_dir / run_stamp() / self._filepath.name
        if path.exists():
            path = self._history_dir / generate_timestamp() / self._filepath.name
            while path.exists():  # two saves within one millisecond
                path = path.parent.with_name(path.parent.name + "_") / self._filepath.name
        return path

    def _save(self, data) -> None:
        kept = self.history_path()
        kept.parent.mkdir(parents=True, exist_ok=True)
        self._inner(kept).save(data)
        if self._filepath.is_dir():
            legacy = self._history_dir / "kedro_versions" / self._filepath.name
            legacy.parent.mkdir(parents=True, exist_ok=True)
            log.info("moving the old versioned folder %s to %s", self._filepath, legacy)
            shutil.move(str(self._filepath), str(legacy))
        write_file_atomically(self._filepath, lambda tmp: shutil.copyfile(kept, tmp))

    def _load(self):
        if not self._filepath.is_file():
            raise FileNotFoundError(f"{self._filepath} does not exist yet (run the pipeline that reports it)")
        return self._inner(self._filepath).load()

    def _exists(self) -> bool:
        return self._filepath.is_file()

    def _describe(self) -> dict[str, Any]:
        return {
            "filepath": str(self._filepath),
            "history_dir": str(self._history_dir),
            "dataset": self._dataset_config["type"],
        }


class ReportFigureDataset(AbstractDataset):
    """A figure and the table it is drawn from as one dataset (one node output, one dataset in kedro-viz):
    saves ``(table, figure)`` as ``<filepath>.csv`` and ``<filepath>.png``, each a [`ReportDataset`][] (the
    latest at the path, every run's copy in ``history/``); load reads the table back (a PNG is not read)."""

    def __init__(self, filepath: str, history_dir: str | None = None, metadata: dict[str, Any] | None = None):
        self._filepath = filepath
        self._table = ReportDataset(f"{filepath}.csv", "pandas.CSVDataset", history_dir)
        self._plot = ReportDataset(f"{filepath}.png", "matplotlib.MatplotlibDataset", history_dir)
        self.metadata = metadata

    def _save(self, data) -> None:
        if not (isinstance(data, tuple) and len(data) == 2):
            raise TypeError(f"{self._filepath}: a figure is saved as (table, figure), got {type(data).__name__}")
        table, figure = data
        self._table.save(table)
        self._plot.save(figure)

    def _load(self):
        return self._table.load()

    def _exists(self) -> bool:
        return self._table.exists() and self._plot.exists()

    def _describe(self) -> dict[str, Any]:
        return {"filepath": self._filepath, "files": [".csv", ".png"]}
