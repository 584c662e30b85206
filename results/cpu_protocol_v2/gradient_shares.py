"""Each loss term's share of the student's gradient in the CPU protocol v2 trials (issue 19's reading).

    PYTHONPATH=src python results/cpu_protocol_v2/gradient_shares.py --tracking-uri sqlite:///<worker checkout>/mlflow.db

Every training run measures, on its first ``runtime.gradient_share_batches`` training batches before
the first step, each weighted term's gradient w.r.t. the student's parameters, g_name = w_name · ∂term/∂θ,
and logs its share ‖g_name‖ / Σ‖g‖ as the MLflow metric ``grad_share/<name>``
(``bert_kd.distill.gradient_share``). This script reads those metrics for the committed trials of this
table (a student's run is matched to its trial JSON through its parent trial run's ``content_key`` tag),
and writes ``tables/gradient_shares.md`` — per row and task, every term's weight and its share (mean over
the trials, min–max) — and ``tables/gradient_shares.png``, the mean shares as stacked bars. Trials whose
run is not in the tracking store (another machine's) are counted, never dropped silently. The shares say
which term trains the student at the papers' weights: a term with a few percent barely moves it, whatever
its weight says.

Trials run since session 14 carry their shares in their own JSON (``result.gradient_shares``). The
per-trial shares found are kept in ``tables/gradient_shares.json`` (content key → term → share) and read
back on the next render, so a worker on a fresh machine (a new, empty MLflow store) adds its trials' shares to
the committed ones instead of replacing them. A render that would measure fewer trials than the committed
table says it did writes nothing and exits 1 (the shares of trials measured before that file existed live
only in the committed table).
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterable, Mapping

HERE = Path(__file__).resolve().parent
RECORD = HERE / "tables" / "gradient_shares.json"
PREFIX = "grad_share/"
KEY_TAG = "content_key"


def paper_gap():
    """``paper_gap.py`` of this folder (the table's trial files, checked against conf/base)."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import paper_gap as module

    return module


def committed_trials(directory: Path = HERE) -> dict[str, dict]:
    """content key → the trial's spec (row, task, seed, recipe) for every trial JSON of ``directory``."""
    trials = {}
    for path in paper_gap().trial_files(directory):
        record = json.loads(path.read_text(encoding="utf-8"))
        trials[record["key"]] = record["spec"]["trial"]
    return trials


def measured_shares(tracking_uri: str, keys: Iterable[str]) -> dict[str, dict[str, float]]:
    """content key → term → gradient share, from the finished MLflow runs of ``tracking_uri``: a trial's run
    (role ``trial``) carries the ``content_key`` tag, its student's training run (role ``student``, a child of
    it) the ``grad_share/*`` metrics. A key run twice (an interrupted worker's first try): its latest. No key
    wanted (every trial carries its shares): the store is not opened."""
    wanted = set(keys)
    if not wanted:
        return {}
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    runs, token = [], None
    while experiments:
        page = client.search_runs(experiments, "attributes.status = 'FINISHED'", max_results=1000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            break
    trial_key = {run.info.run_id: run.data.tags.get(KEY_TAG) for run in runs if run.data.tags.get("role") == "trial"}
    latest = {}
    for run in runs:
        key = trial_key.get(run.data.tags.get("mlflow.parentRunId", ""))
        measured = {name[len(PREFIX):]: value for name, value in run.data.metrics.items() if name.startswith(PREFIX)}
        if run.data.tags.get("role") == "student" and key in wanted and measured:
            if key not in latest or run.info.start_time > latest[key][0]:
                latest[key] = (run.info.start_time, measured)
    return {key: measured for key, (_, measured) in latest.items()}


def share_table(trials: Mapping[str, dict], shares: Mapping[str, Mapping[str, float]]) -> list[str]:
    """Markdown rows: task, row, trials measured / committed, and per term ``name (w) mean% (min–max)``,
    the terms in the recipe's order, its weights with the shorthands expanded (β = 1 − η − λ; α/β)."""
    from bert_kd.schema import explicit_weights

    groups: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
    for key, trial in trials.items():
        groups[(trial["task"], trial["method"])].append(key)
    lines = ["| task | row | trials measured | term (weight): share of the student's gradient, mean (min–max) |",
             "|---|---|---|---|"]
    for (task, row), keys in sorted(groups.items()):
        weights = explicit_weights(trials[keys[0]]["recipe"])
        found = [shares[key] for key in keys if key in shares]
        cells = []
        for term in [*weights, *sorted({name for measured in found for name in measured} - set(weights))]:
            values = [100 * measured[term] for measured in found if term in measured]
            if values:
                cells.append(f"{term} ({weights.get(term, '–')}): {sum(values) / len(values):.1f}% "
                             f"({min(values):.1f}–{max(values):.1f})")
        lines.append(f"| {task} | {row} | {len(found)} of {len(keys)} | {'; '.join(cells) or 'not measured'} |")
    return lines


def mean_shares(trials: Mapping[str, dict], shares: Mapping[str, Mapping[str, float]]) -> dict[tuple[str, str], dict[str, float]]:
    """(task, row) → term → mean share over the row's measured trials (rows with none left out)."""
    found: dict[tuple[str, str], list[Mapping[str, float]]] = collections.defaultdict(list)
    for key, trial in trials.items():
        if key in shares:
            found[(trial["task"], trial["method"])].append(shares[key])
    return {group: {term: sum(m.get(term, 0.0) for m in measured) / len(measured)
                    for term in dict.fromkeys(t for m in measured for t in m)}
            for group, measured in sorted(found.items())}


def shares_figure(means: Mapping[tuple[str, str], Mapping[str, float]], title: str = ""):
    """One stacked bar per (task, row): each term's mean share of the student's gradient, a colour per term."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = list(means)
    terms = list(dict.fromkeys(term for group in groups for term in means[group]))
    colours = dict(zip(terms, plt.get_cmap("tab10").colors))
    fig, ax = plt.subplots(figsize=(8.0, 1.2 + 0.3 * max(len(groups), 1)))
    for y, group in enumerate(reversed(groups)):
        left = 0.0
        for term in terms:
            width = 100 * means[group].get(term, 0.0)
            ax.barh(y, width, left=left, color=colours[term], label=term if y == 0 else None)
            left += width
    label = paper_gap().task_label
    ax.set_yticks(range(len(groups)), [f"{row} · {label(task)}" for task, row in reversed(groups)], fontsize=7)
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of the student's gradient at the start of training, % (mean over trials)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[term]) for term in terms]
    ax.legend(handles, terms, loc="upper center", bbox_to_anchor=(0.5, -0.5 / (1.2 + 0.3 * max(len(groups), 1)) - 0.06),
              ncol=len(terms), fontsize=7, frameon=False)
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


def recorded_shares(record: Path = RECORD) -> dict[str, dict[str, float]]:
    """content key → term → share, as committed in ``record`` (empty when there is none yet)."""
    if not record.exists():
        return {}
    return json.loads(record.read_text(encoding="utf-8"))


def trial_shares(directory: Path = HERE) -> dict[str, dict[str, float]]:
    """content key → term → share, from the trial JSONs that carry them (``result.gradient_shares``: trials
    run since session 14; earlier ones have them in MLflow only)."""
    found = {}
    for path in paper_gap().trial_files(directory):
        record = json.loads(path.read_text(encoding="utf-8"))
        if record["result"].get("gradient_shares"):
            found[record["key"]] = record["result"]["gradient_shares"]
    return found


def known_shares(tracking_uri: str, trials: Iterable[str], record: Path = RECORD,
                 directory: Path | None = None) -> dict[str, dict[str, float]]:
    """The committed trials' shares: those recorded in ``record`` (a trial measured once keeps its committed
    value), then those the trial JSONs of ``directory`` carry, and the store's for the others."""
    keys = list(trials)
    recorded = {**(trial_shares(directory) if directory is not None else {}), **recorded_shares(record)}
    found = measured_shares(tracking_uri, [key for key in keys if key not in recorded])
    return {key: recorded.get(key) or found[key] for key in keys if key in recorded or key in found}


def measured_in(table: Path) -> int | None:
    """How many trials the committed table ``table`` says were measured (None: no such table or line)."""
    if not table.exists():
        return None
    match = re.search(r"(\d+) of the \d+ committed trials", table.read_text(encoding="utf-8"))
    return int(match.group(1)) if match else None


def render(trials: Mapping[str, dict], shares: Mapping[str, Mapping[str, float]], figure: Path | None = None) -> str:
    """The Markdown table of the committed ``trials``' ``shares`` (:func:`known_shares`); with ``figure``, also
    :func:`shares_figure` written there (atomically)."""
    if figure is not None:
        from bert_kd.jobs import write_file_atomically

        fig = shares_figure(mean_shares(trials, shares), "CPU protocol v2: what trains the student")
        write_file_atomically(figure, lambda tmp: fig.savefig(str(tmp), dpi=120, format="png", metadata={"Software": None},
                                                              bbox_inches="tight"))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=HERE).stdout.strip() or "unknown"
    return "\n".join([
        "# Each term's share of the student's gradient, CPU protocol v2",
        "",
        f"Made by: `PYTHONPATH=src python results/cpu_protocol_v2/gradient_shares.py --tracking-uri <the workers' "
        f"store>` at commit `{commit}`; {len(shares)} of the {len(trials)} committed trials measured (that store and "
        "`gradient_shares.json`). "
        "Measured by every run on its first 2 training batches before the first step (‖w·∂term/∂θ‖ / Σ‖·‖ over "
        "the student's own parameters; `bert_kd.distill.gradient_share`), logged as `grad_share/<term>`. The "
        "weights are the table's (fixed before any result); a term's share is what it does to the student.",
        "",
        *share_table(trials, shares),
        "",
    ])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tracking-uri", default="sqlite:///mlflow.db", help="the MLflow store the trials ran with")
    parser.add_argument("--directory", type=Path, default=HERE, help="the table's results folder")
    parser.add_argument("--out", type=Path, default=HERE / "tables" / "gradient_shares.md")
    args = parser.parse_args(argv)
    from bert_kd.jobs import write_file_atomically

    record = args.out.with_suffix(".json")
    trials = committed_trials(args.directory)
    shares = known_shares(args.tracking_uri, trials, record, args.directory)
    before = measured_in(args.out)
    if before is not None and len(shares) < before:
        sys.exit(f"{args.out}: would measure {len(shares)} trials, fewer than the {before} it says it measured "
                 f"(this store lacks the earlier runs, {record.name} does not hold them); nothing written")
    text = render(trials, shares, args.out.with_suffix(".png"))
    write_file_atomically(record, lambda tmp: tmp.write_text(json.dumps(shares, indent=1, sort_keys=True) + "\n",
                                                             encoding="utf-8"))
    write_file_atomically(args.out, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    sys.stdout.write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
