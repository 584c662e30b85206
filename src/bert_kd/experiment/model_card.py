"""A stored model's Hugging Face model card (``README.md``), written from its store entry alone.

The hub's convention for a shared checkpoint is a ``README.md`` whose YAML header the hub (and
`huggingface_hub.ModelCard`) reads: ``model-index`` with one evaluation result per dev
metric (task, dataset ``nyu-mll/glue`` and its config, metric name and value), ``base_model``,
``license``, ``tags``, ``datasets``. The body says how the model was made: the recipe, the
teacher and its dev score, the layer map, the training data and its limits, the seed, the commit,
the MLflow run and the noise of one dev-set run (``0.5 / √n``,
[`bert_kd.core.reports.verdict.noise_tolerance`][]).

The card is built as plain text (no template engine: every value may come from a file someone else wrote),
its YAML header dumped by `huggingface_hub.ModelCardData`. Everything is read from the entry's files: ``bert_kd.json`` (what the model is, its dev metrics),
``manifest.json`` (the job's spec and provenance) and, for a student, its teacher's entry in the
same store. A card is derived from them, so the store check lets it stand beside the listed files
([`CARD_FILE`][]). Kedro- and MLflow-free: the caller passes the run's link.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path
from typing import Any, Mapping

from bert_kd.core.data.glue import HF_DATASET, get_task
from bert_kd.core.files import MANIFEST
from bert_kd.core.metrics import metric_label
from bert_kd.core.models import OFFLINE_MINILM_ALIASES
from bert_kd.core.reports.verdict import noise_tolerance
from bert_kd.experiment.card_text import escaped, link_target, literal, one_line
from bert_kd.experiment.jobs import MODEL_CARD
from bert_kd.experiment.lineage import Lineage

#: The card's file name in a model folder (the hub shows it as the repository's page).
CARD_FILE = MODEL_CARD
#: The license a card claims unless told otherwise: that of BERT and MiniLM, the checkpoints the
#: project's teachers start from. A teacher under another license needs ``license=``.
DEFAULT_LICENSE = "apache-2.0"
#: Keys of a training history record that are not dev metrics.
NOT_METRICS = ("epoch", "global_step", "loss")
#: Hub metric types of the GLUE metric keys (the hub's names: ``pearsonr``, not ``pearson``).
HUB_METRIC_TYPES = {"pearson": "pearsonr"}
#: The dev split a task's model-selection metric is measured on.
DEV_SPLITS = {"mnli": "validation_matched"}
#: Hub ids of checkpoints the project names by an alias (the offline MiniLM-L6 package ships this model).
HUB_IDS = {alias: "sentence-transformers/all-MiniLM-L6-v2" for alias in OFFLINE_MINILM_ALIASES}


def _read_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def dev_metrics(info: Mapping) -> dict[str, float]:
    """The dev metrics of a stored model: its evaluation's (``info["metrics"]`` of the dev split)
    when given, else the kept epoch's (``best_metrics``); finite numbers only."""
    metrics = info.get("best_metrics") or {}
    out = {}
    for name, value in metrics.items():
        if name in NOT_METRICS or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if value == value and abs(float(value)) != float("inf"):
            out[name] = float(value)
    return out


def _teacher_entry(directory: Path, teacher_key: str | None) -> dict:
    """The teacher's ``bert_kd.json`` in the same store (``<root>/teacher/<key>``), ``{}`` when absent."""
    if not teacher_key:
        return {}
    return _read_json(directory.resolve().parent.parent / "teacher" / str(teacher_key) / "bert_kd.json")


def _hub_id(name: Any) -> str | None:
    """``name`` when it reads as a hub repository id (``owner/model``), not a local path; a project alias
    ([`HUB_IDS`][]) as the hub id it stands for."""
    text = HUB_IDS.get(str(name or "").lower(), str(name or ""))
    if re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", text) and not Path(text).exists():
        return text
    return None


def _format_layer_map(mapping) -> str | None:
    if not isinstance(mapping, list) or not all(isinstance(m, list) for m in mapping):
        return None
    return ", ".join(f"{j}←{'+'.join(map(str, m)) if m else '—'}" for j, m in enumerate(mapping, 1))


#: Model types the card names by their architecture (a student's row may be a recipe's name, ``logits_mse``).
ARCHITECTURE_NAMES = {"bert_kd_bilstm": ("bilstm", "BiLSTM")}


def model_name(method: str | None, model_type: str | None) -> str | None:
    """A stored model's name for its card: its row (``alp_no``), or the architecture's name (``bilstm``) where
    the row does not say it (a BiLSTM entry stored under its recipe's row, ``logits_mse``)."""
    name, _ = ARCHITECTURE_NAMES.get(str(model_type), (None, None))
    if name and name not in str(method or ""):
        return name
    return method


def _number(value: float) -> str:
    return f"{value:.4g}"


def card_facts(directory: str | Path) -> dict:
    """What a card says about the model in ``directory`` (a store entry or a copy of one)."""
    directory = Path(directory)
    info = _read_json(directory / "bert_kd.json")
    manifest = _read_json(directory / MANIFEST)
    spec = manifest.get("spec") or {}
    provenance = manifest.get("provenance") or {}
    task = get_task(info.get("task") or spec.get("task"))
    role = info.get("role") or "model"
    lineage = Lineage.read(directory)
    teacher_key = lineage.teacher_key
    teacher = _teacher_entry(directory, teacher_key) if role != "teacher" else {}
    base = info.get("base_model") if role == "teacher" else teacher.get("base_model")
    recipe = spec.get("recipe") or {}
    config = _read_json(directory / "config.json")
    return {
        "task": task,
        "role": role,
        "method": model_name(info.get("method"), config.get("model_type"))
        or ("fine-tuning" if role == "teacher" else None),
        "model_type": config.get("model_type"),
        "algorithm": info.get("algorithm") or recipe.get("method"),
        "metrics": dev_metrics(info),
        "dev_split": info.get("dev_split") or DEV_SPLITS.get(task.name, "validation"),
        "dev_examples": info.get("dev_examples"),
        "recipe": recipe,
        "layer_map": _format_layer_map(info.get("layer_map")) or recipe.get("mapping"),
        "teacher_key": teacher_key,
        "teacher_metrics": dev_metrics(teacher),
        "base_model": _hub_id(base),
        "base_model_name": base,
        "seed": spec.get("seed", info.get("seed")),
        "data": spec.get("data"),
        "training": spec.get("training") or {},
        "commit": provenance.get("git_commit"),
        # the store check proves the provenance only where the manifest records its sha256 (since 2026-12-07)
        "provenance_verified": "provenance_sha256" in manifest,
        "run_id": lineage.run_id,
        "key": lineage.key,
        "parameters": info.get("parameters") or _parameter_count(directory),
        "layers": config.get("num_hidden_layers"),
        "train_examples": info.get("train_examples"),
        "label_names": info.get("label_names") or list(task.label_names),
        "info": info,
    }


def _parameter_count(directory: Path) -> int | None:
    """The parameters in ``directory``'s safetensors files (read from their headers, no weights loaded)."""
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        return None
    try:
        from safetensors import safe_open

        total = 0
        for path in files:
            with safe_open(str(path), framework="pt") as handle:
                for name in handle.keys():  # noqa: SIM118 - a safetensors handle is no dict
                    shape = handle.get_slice(name).get_shape()
                    count = 1
                    for size in shape:
                        count *= size
                    total += count
        return total
    except Exception:  # noqa: BLE001 - a size the card cannot read is "not recorded", never a failed card
        return None


def model_card(
    directory: str | Path,
    *,
    run_link: str | None = None,
    registered: str | None = None,
    license: str = DEFAULT_LICENSE,
    repo_id: str | None = None,
):
    """The `huggingface_hub.ModelCard` of the stored model in ``directory`` (``run_link``: the
    MLflow UI link of its training run; ``registered``: its registered ``models:/`` URI, if any;
    ``repo_id``: the hub repository it is pushed to, which its snippet loads)."""
    from huggingface_hub import EvalResult, ModelCard, ModelCardData

    facts = card_facts(directory)
    task = facts["task"]
    name = f"{facts['method'] or facts['role']}-{task.name}-{facts['role']}".replace("_", "-")
    results = [
        EvalResult(
            task_type="text-classification",
            task_name="Text Classification" if not task.is_regression else "Text Regression",
            dataset_type=HF_DATASET,
            dataset_name=f"GLUE {task.dir_name}",
            dataset_config=task.hf_config,
            dataset_split=facts["dev_split"],
            metric_type=HUB_METRIC_TYPES.get(metric, metric),
            metric_name=f"dev {metric_label(metric)}",
            metric_value=round(value, 4),
        )
        for metric, value in sorted(facts["metrics"].items())
    ]
    tags = ["bert-kd", "text-classification", "glue", task.name]
    if facts["role"] != "teacher":
        tags += ["knowledge-distillation", *([facts["algorithm"]] if facts["algorithm"] else [])]
    if custom_code(facts):
        tags.append("custom_code")
    data = ModelCardData(
        model_name=name,
        base_model=facts["base_model"],
        license=license,
        library_name="transformers",
        pipeline_tag="text-classification",
        datasets=[HF_DATASET],
        metrics=sorted({HUB_METRIC_TYPES.get(m, m) for m in facts["metrics"]}),
        tags=tags,
        eval_results=results or None,
    )
    # No template engine over text read from artifacts (a `{{ … }}` in a store entry, a logged model or a
    # registered name would run as Jinja2): the header is YAML dumped by the hub's own card data, the body plain text.
    body = _body({**facts, "repo_id": repo_id}, run_link, registered, name, license)
    return ModelCard(f"---\n{data.to_yaml()}\n---\n{body}")


def _body(facts: Mapping, run_link: str | None, registered: str | None, name: str, license: str) -> str:
    """The card's Markdown body. Every value read from the entry's files (or given: the registered name, the
    license) is free text someone may have edited: it is written as a code span ([`literal`][]) or escaped
    ([`escaped`][]), never as Markdown or HTML of its own."""
    task = facts["task"]
    n = facts["dev_examples"]
    noise = (
        f"±{noise_tolerance(n):.4f} ({n} dev examples, 0.5/√n): two scores closer than that cannot be told "
        "apart by one dev-set run"
        if isinstance(n, int) and n > 0
        else "not recorded (the entry does not say how many dev examples it was scored on)"
    )
    metrics = ", ".join(f"{escaped(metric_label(k))} {_number(v)}" for k, v in sorted(facts["metrics"].items()))
    teacher_score = ", ".join(
        f"{escaped(metric_label(k))} {_number(v)}" for k, v in sorted(facts["teacher_metrics"].items())
    )
    training = facts["training"]
    run = _run_line(facts["run_id"], run_link)
    size = ", ".join(
        part
        for part in (
            f"{escaped(facts['layers'])} layers" if facts["layers"] else "",
            f"{facts['parameters'] / 1e6:.1f} M parameters" if isinstance(facts["parameters"], (int, float)) else "",
        )
        if part
    )
    made = "a teacher fine-tuned" if facts["role"] == "teacher" else _student_phrase(facts)
    entry = f" ({literal(str(facts['role']) + '/' + str(facts['key']))})." if facts["key"] else "."
    lines = [
        "",
        f"# {escaped(name)}",
        "",
        f"GLUE {task.dir_name} {'regression' if task.is_regression else 'classification'}: {made}"
        + " by bert-kd (knowledge distillation of BERT models on GLUE), from its store entry"
        + entry,
        "",
        f"- **Dev metrics** ({escaped(facts['dev_split'])}): {metrics or 'none'}",
        *_floor_lines(facts),
        f"- **Noise of one dev-set run**: {noise}",
        f"- **Size**: {size or 'not recorded'}",
    ]
    if facts["role"] != "teacher":
        recipe = (
            literal(json.dumps(facts["recipe"], sort_keys=True, default=str)) if facts["recipe"] else "not recorded"
        )
        teacher_key = str(facts["teacher_key"])
        lines += [
            f"- **Recipe**: method {literal(facts['algorithm'] or facts['method'])}; {recipe}",
            f"- **Teacher**: the store entry {literal('teacher/' + teacher_key[:12] + '…')}"
            + (f" ({literal(facts['base_model_name'])} fine-tuned)" if facts["base_model_name"] else "")
            + (f"; dev {teacher_score}" if teacher_score else "; its dev score is not in this store"),
            "- **Layer map** (student layer ← teacher layers): "
            + (escaped(facts["layer_map"]) if facts["layer_map"] else "none (output-level method)"),
        ]
    elif facts["base_model_name"]:
        lines.append(f"- **Base model**: {literal(facts['base_model_name'])}")
    settings = ", ".join(
        f"{k} {escaped(training[k])}" for k in ("epochs", "batch_size", "learning_rate") if k in training
    )
    seed = escaped(facts["seed"]) if facts["seed"] is not None else "not recorded"
    lines += [
        f"- **Training data**: GLUE {task.dir_name} train split ({HF_DATASET}, config `{task.hf_config}`), "
        f"{_rows(facts['train_examples'])}, rows fingerprint {literal(facts['data'] or 'not recorded')}; " + settings,
        f"- **Seed**: {seed}",
        f"- **Commit**: {_commit(facts)}",
        f"- **MLflow run**: {run}",
    ]
    if registered:
        lines.append(f"- **Registered as**: {literal(registered)}")
    lines += [
        f"- **License**: {literal(license)}",
        "",
        *_how_to_use(facts),
        *_citation(facts),
        "## Limits",
        "",
        f"Scored on the GLUE {task.dir_name} dev split only, which also chose the kept epoch: the score is "
        "optimistic for unseen data, and GLUE's test labels are private. One seed: differences within the "
        "noise above are not evidence. English only; the training rows may be a sample of the train split "
        "(see the fingerprint and the run's `max_train_samples`).",
        "",
    ]
    return "\n".join(lines)


def _commit(facts: Mapping) -> str:
    if not facts["commit"]:
        return "not recorded"
    if facts.get("provenance_verified"):
        return literal(facts["commit"])
    return f"{literal(facts['commit'])} (unverified: the entry's manifest predates its provenance hash)"


def _floor_lines(facts: Mapping) -> list[str]:
    """The score against the majority class of the same dev rows (**WARNING** at or below it) and the rows cut
    at the max length, as the entry's ``bert_kd.json`` recorded them (nothing for an entry stored before)."""
    from bert_kd.core.metrics import primary_metric
    from bert_kd.experiment.floor import card_floor

    floor = card_floor(facts["info"], facts["metrics"], primary_metric(facts["task"].name))
    if floor is None:
        return []
    lines = []
    if floor.majority is not None:
        standing = floor.standing()
        lines.append("- **Against the majority class**: " + (f"**{standing}**" if floor.at_or_below else standing))
    if floor.cut_line():
        lines.append(f"- **Input cut**: {floor.cut_line().removeprefix('input cut ')}")
    return lines


def _student_phrase(facts: Mapping) -> str:
    """``a student distilled with `alp_no```; for an architecture other than BERT its name and its recipe
    (``a BiLSTM student distilled with `logits_mse```)."""
    _, architecture = ARCHITECTURE_NAMES.get(str(facts.get("model_type")), (None, None))
    if architecture:
        return f"a {architecture} student distilled with {literal(facts['algorithm'] or facts['method'])}"
    return f"a student distilled with {literal(facts['method'])}"


def _run_line(run_id: str | None, run_link: str | None) -> str:
    """The MLflow run: linked where the link reaches a server others can open, else its id alone (a link to
    ``127.0.0.1`` or ``localhost`` opens nothing on a reader's machine, an address with spaces, brackets or
    another scheme is no link)."""
    if not run_id:
        return "none"
    target = link_target(run_link)
    local = not target or any(host in target for host in ("://127.0.0.1", "://localhost", "://0.0.0.0"))
    return f"{literal(run_id)} (in the tracking store it was trained in)" if local else f"[{literal(run_id)}]({target})"


def _rows(count) -> str:
    return f"{int(count):,} training rows" if isinstance(count, int) and count > 0 else "training rows not recorded"


def custom_code(facts: Mapping) -> bool:
    """The model's architecture is not one ``transformers`` knows: its pushed folder carries its modelling file
    ([`bert_kd.experiment.hub`][]) and loads with ``trust_remote_code=True``."""
    from bert_kd.core.bilstm import MODEL_TYPE

    return facts.get("model_type") == MODEL_TYPE


#: The snippet's repository where the card is written for no push (``bert-kd card``).
NO_REPOSITORY = "<this repository>"


def _how_to_use(facts: Mapping) -> list[str]:
    """A snippet that classifies with the pushed folder through `transformers`' pipeline (label names from the
    config's ``id2label``), loading the hub repository the card is pushed to (``repo_id``; [`NO_REPOSITORY`][]
    for a card written for no push), with ``trust_remote_code=True`` for an architecture of its own."""
    task = facts["task"]
    if task.has_pair:
        text = '{"text": "The cat sat on the mat.", "text_pair": "A cat was sitting on a mat."}'
    else:
        text = '"a gripping, beautifully acted film"'
    note = (
        [
            "The BiLSTM is not a `transformers` architecture: its modelling code is this repository's "
            f"`modeling_{facts['model_type']}.py`, which `trust_remote_code=True` runs (read it first).",
            "",
        ]
        if custom_code(facts)
        else []
    )
    return [
        "## How to use",
        "",
        *note,
        "```python",
        "from transformers import pipeline",
        "",
        f'classify = pipeline("text-classification", model="{facts.get("repo_id") or NO_REPOSITORY}"'
        + (", trust_remote_code=True)" if custom_code(facts) else ")"),
        f"print(classify({text}))  # labels: {one_line(', '.join(map(str, facts['label_names']))) or 'a score'}",
        "```",
        "",
    ]


def _citation(facts: Mapping) -> list[str]:
    """The method's paper as BibTeX ([`bert_kd.experiment.citations`][]), if it has one."""
    from bert_kd.experiment.citations import citation

    bibtex = citation(facts["algorithm"]) if facts["role"] != "teacher" else None
    return ["## Citation", "", "The method's paper:", "", "```bibtex", bibtex, "```", ""] if bibtex else []


def write_model_card(directory: str | Path, output: str | Path | None = None, **options) -> Path:
    """Write [`model_card`][] of ``directory`` to ``output`` (default ``<directory>/README.md``)
    all at once (a temporary sibling renamed over it); the path written."""
    target = Path(output) if output is not None else Path(directory) / CARD_FILE
    if _read_json(Path(directory) / "bert_kd.json").get("role") == "general_student":  # no task, no dev metric
        from bert_kd.experiment.general_card import general_card

        text = general_card(directory, options.get("run_link"))
    else:
        text = str(model_card(directory, **options))
    target.parent.mkdir(parents=True, exist_ok=True)
    for leftover in target.parent.glob(f".{target.name}.tmp-*"):  # a write killed before its rename
        leftover.unlink(missing_ok=True)
    temporary = target.with_name(f".{target.name}.tmp-{uuid.uuid4().hex[:8]}")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, target)
    return target
