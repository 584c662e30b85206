"""How a score stands against its task's floor, the majority class, and how much of its input was cut
(Kedro- and MLflow-free): one reading for the terminal's closing summary, the model's run and its card.

A classifier that always answers the dev split's commonest label scores the majority share (RTE: 0.5271);
a model at or below it learned nothing that guess does not, whatever its number looks like. Where the
tokenizer cut rows at the max length (RTE pairs at 64 tokens), the score is of the cut inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

#: The word a score at or below its floor is shown with, in the terminal, on the run and on the card.
WARNING = "WARNING"


@dataclass(frozen=True)
class Floor:
    """A score, its task's majority-class share on the same dev rows (None: regression, no such floor) and
    the rows cut at the max length (``cut``: split → ``{"max_length", "rows", "cut"}``)."""

    metric: str
    score: float
    majority: float | None
    cut: Mapping[str, Mapping[str, int]]
    split: str = "validation"

    @property
    def at_or_below(self) -> bool:
        """The score does no better than always answering the commonest label."""
        return self.majority is not None and self.score <= self.majority

    @property
    def margin(self) -> float | None:
        """score − majority share (None without a floor)."""
        return None if self.majority is None else self.score - self.majority

    def standing(self) -> str | None:
        """``+0.0312 over the majority class (0.5271)``, or the warning at or below it; None without a floor."""
        if self.majority is None:
            return None
        if self.at_or_below:
            return (
                f"{WARNING}: {self.metric} {self.score:.4f} is at or below the majority class ({self.majority:.4f}): "
                "no better than always answering the commonest label"
            )
        return f"{self.margin:+.4f} over the majority class ({self.majority:.4f})"

    def cut_line(self) -> str | None:
        """``input cut at 64 tokens: 97 of 277 dev rows, 1,024 of 2,490 training rows``; None where nothing was."""
        parts, length = [], None
        for split, label in ((self.split, "dev"), ("train", "training")):
            record = self.cut.get(split) or {}
            if record.get("cut"):
                length = length or record.get("max_length")
                parts.append(f"{int(record['cut']):,} of {int(record['rows']):,} {label} rows")
        return f"input cut at {length} tokens: {', '.join(parts)}" if parts else None

    def lines(self) -> list[str]:
        return [line for line in (self.standing(), self.cut_line()) if line]


def _main_split(splits) -> str | None:
    names = list(splits or {})
    return "validation_matched" if "validation_matched" in names else (names[0] if names else None)


def floor_of(evaluation: Mapping[str, Any]) -> Floor | None:
    """The [`Floor`][] of an evaluation ([`bert_kd.experiment.evaluation.evaluate_bundle`][]'s dict); None
    without a score."""
    metric, score = evaluation.get("primary_metric"), evaluation.get("score")
    if not metric or score is None:
        return None
    split = _main_split(evaluation.get("metrics")) or "validation"
    majority = ((evaluation.get("majority_class") or {}).get(split) or {}).get(metric)
    return Floor(
        metric, float(score), None if majority is None else float(majority), evaluation.get("input_cut") or {}, split
    )


def dev_floor(task: str, data, split: str) -> dict:
    """What a trained model's ``bert_kd.json`` records for its card: the majority-class metrics of the dev
    ``split`` of ``data`` (a ``DatasetDict``) and the rows cut at the max length in each split."""
    from bert_kd.core.data.tokenize import input_cut
    from bert_kd.core.reports.verdict import majority_class_metrics

    cut = {name: record for name, dataset in data.items() if (record := input_cut(dataset))}
    return {"majority_class": majority_class_metrics(task, data[split]["labels"]), "input_cut": cut}


def card_floor(info: Mapping[str, Any], metrics: Mapping[str, float], metric: str) -> Floor | None:
    """The [`Floor`][] a card shows: the model's kept ``metric`` against the majority class its
    ``bert_kd.json`` recorded (None for an entry stored before it did, or without that metric)."""
    if metric not in metrics or "majority_class" not in info:
        return None
    majority = (info.get("majority_class") or {}).get(metric)
    return Floor(
        metric,
        float(metrics[metric]),
        None if majority is None else float(majority),
        info.get("input_cut") or {},
        str(info.get("dev_split") or "validation"),
    )
