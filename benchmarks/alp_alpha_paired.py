"""ALP's α spread against one-hot, directly: the paired test on the same seeds (results/alp_alpha/paired.md).

``cpu_protocol_v2_alpha``'s ALP (α the softmax of h_S · h_T / √d, spread) against ``cpu_protocol_v2``'s ALP (Eq. 5's
raw dot product, one-hot on MiniLM), every other setting equal: per task, the paired bootstrap over dev examples of
the accuracy gain scaled − one-hot with the seeds both tables have pooled (``analysis.statistics.bootstrap_test``,
the readings' test), its 95% interval, and how many dev predictions the two students of each seed disagree on
(a test of α cannot see more than those).

    PYTHONPATH=src .venv/bin/python benchmarks/alp_alpha_paired.py > results/alp_alpha/paired.md
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from bert_kd.analysis.statistics import RESAMPLES, bootstrap_test

RESULTS = Path(__file__).resolve().parents[1] / "results"


def trials(table: str, row: str) -> dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]:
    """(task, seed) -> (dev predictions, dev labels) of ``row``'s trials in ``results/<table>``."""
    out = {}
    for path in sorted((RESULTS / table).glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        if record["spec"]["trial"]["method"] != row:
            continue
        trial, result = record["spec"]["trial"], record["result"]
        out[(trial["task"], trial["seed"])] = (np.asarray(result["dev_predictions"]), np.asarray(result["dev_labels"]))
    return out


def main() -> None:
    one_hot, spread = trials("cpu_protocol_v2", "alp"), trials("cpu_protocol_v2_alpha", "alp_scaled")
    print(
        "| task | seeds | gain scaled − one-hot (points) | 95% interval | p (gain > 0) | p (gain < 0) | predictions that differ per seed |"
    )
    print("|---|---|---|---|---|---|---|")
    for task in sorted({t for t, _ in spread}):
        seeds = sorted(s for t, s in spread if t == task and (t, s) in one_hot)
        right = [(spread[(task, s)][0] == spread[(task, s)][1]).astype(int) for s in seeds]
        wrong = [(one_hot[(task, s)][0] == one_hot[(task, s)][1]).astype(int) for s in seeds]
        test = bootstrap_test(np.array(right), np.array(wrong), resamples=RESAMPLES)
        differ = [int((spread[(task, s)][0] != one_hot[(task, s)][0]).sum()) for s in seeds]
        print(
            f"| {task} | {len(seeds)} | {100 * test.gain:+.2f} | [{100 * test.low:+.2f}, {100 * test.high:+.2f}] | "
            f"{test.p:.3f} | {test.reverse_p:.3f} | {min(differ)}–{max(differ)} of {len(right[0])} |"
        )
    print()
    print(f"Paired bootstrap over dev examples, seeds pooled, {RESAMPLES:,} resamples (seed 0).")


if __name__ == "__main__":
    main()
