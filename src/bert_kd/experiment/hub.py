"""A stored model as a Hugging Face hub repository: the folder that is pushed and the push itself.

The pushed folder is the model as ``transformers`` loads it (config, weights, tokenizer files),
``bert_kd.json`` (what the model is: task, labels, dev metrics) and the model card ``README.md``
([`bert_kd.experiment.model_card`][]), whose snippet names the repository it is pushed to. An architecture
``transformers`` does not know (Tang et al.'s BiLSTM, ``bert_kd_bilstm``) follows the Hub's convention for custom
code: its modelling file (bert-kd's own, which imports nothing of bert-kd) beside the weights and ``auto_map`` in
``config.json``, loaded with ``trust_remote_code=True``. The store's ``manifest.json`` stays home: it names the
training machine and process. [`push_folder`][] writes exactly that folder (``bert-kd push
--dry-run``), [`push_to_hub`][] writes it to a temporary folder and uploads it with
``huggingface_hub`` (``HfApi.create_repo`` + ``upload_folder``).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from bert_kd.config.errors import UserError
from bert_kd.core.files import MANIFEST
from bert_kd.experiment.model_card import CARD_FILE, write_model_card

#: Files of a store entry that are not pushed (the card is written afresh into the pushed folder).
NOT_PUSHED = (MANIFEST, CARD_FILE)


def push_folder(model_dir: str | Path, target: str | Path, **card_options) -> Path:
    """Write the folder a push uploads: ``model_dir``'s files but [`NOT_PUSHED`][], and its model
    card (``card_options``: [`model_card`][model_card.model_card]'s). ``target`` must
    not exist or be empty. → ``target``."""
    source, target = Path(model_dir), Path(target)
    if not (source / "config.json").is_file():
        raise FileNotFoundError(f"{source} is not a saved model folder (no config.json)")
    check_no_links(source)
    if target.exists() and any(target.iterdir()):
        raise FileExistsError(f"{target} is not empty: give a new folder to write the pushed files into")
    created = not target.exists()
    target.mkdir(parents=True, exist_ok=True)
    try:
        _fill(source, target, card_options)
    except BaseException:  # a full disk, an interruption: no half-written folder is left to be pushed later
        shutil.rmtree(target, ignore_errors=True)
        if not created:
            target.mkdir(exist_ok=True)
        raise
    return target


def _fill(source: Path, target: Path, card_options: dict) -> None:
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if path.is_dir() or str(relative) in NOT_PUSHED or relative.name.startswith("."):
            continue
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target / relative)
    _name_labels(target)
    _with_custom_code(target)
    write_model_card(source, target / CARD_FILE, **card_options)


def _with_custom_code(folder: Path) -> None:
    """For a model ``transformers`` does not know (a model type of [`bert_kd.core.bilstm`][]): its modelling
    file copied into ``folder`` and ``auto_map`` in its ``config.json``, so that
    ``from_pretrained(…, trust_remote_code=True)`` loads it where bert-kd is not installed."""
    import inspect
    import json

    from bert_kd.core import bilstm

    config_file = folder / "config.json"
    config = json.loads(config_file.read_text(encoding="utf-8"))
    if config.get("model_type") != bilstm.MODEL_TYPE:
        return
    shutil.copyfile(inspect.getsourcefile(bilstm), folder / bilstm.MODELING_FILE)
    module = bilstm.MODELING_FILE.removesuffix(".py")
    config["auto_map"] = {auto: f"{module}.{name}" for auto, name in bilstm.AUTO_MAP.items()}
    config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _name_labels(folder: Path) -> None:
    """The pushed ``config.json`` with the task's label names (``id2label``/``label2id``, from ``bert_kd.json``),
    for entries saved before their configs carried them."""
    import json

    from transformers import AutoConfig

    from bert_kd.core.models import name_labels, task_record

    info_file = folder / "bert_kd.json"
    info = json.loads(info_file.read_text(encoding="utf-8")) if info_file.is_file() else {}
    config = AutoConfig.from_pretrained(folder)
    names = info.get("label_names") or task_record(info.get("task"), config.num_labels).get("label_names")
    if names and name_labels(config, names):
        config.save_pretrained(folder)


def check_no_links(source: Path) -> None:
    """A pushed folder holds plain files: a symbolic link inside it (which would upload whatever file it points
    to) is a [`UserError`][] naming it."""
    for path in sorted(source.rglob("*")):
        if path.is_symlink():
            raise UserError(
                f"{path} is a symbolic link (to {path.readlink()}): a push uploads the model's own files only",
                str(source),
                "replace the link by the file it points to, or remove it, then push again",
            )


def check_repo_id(repo_id: str) -> None:
    """``repo_id`` as the hub accepts it (``owner/name``; `huggingface_hub`'s own validator), else a
    [`UserError`][] — also in a dry run, which the hub never sees."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    problem = None
    try:
        validate_repo_id(repo_id)
    except HFValidationError as exc:
        problem = str(exc).splitlines()[0]
    if problem is None and repo_id.count("/") != 1:
        problem = "a model repository is named owner/name"
    if problem:
        raise UserError(
            f"the hub refuses the repository id {repo_id!r}: {problem}",
            "REPO_ID",
            "name it owner/name: letters, digits, '-', '_', '.', at most 96 characters, e.g. alice/alp-kd-sst2",
        )


def push_to_hub(
    model_dir: str | Path,
    repo_id: str,
    *,
    private: bool = False,
    token: str | None = None,
    api=None,
    **card_options,
) -> str:
    """Upload [`push_folder`][] of ``model_dir`` to the hub model repository ``repo_id`` (created
    when absent); the commit's URL."""
    from huggingface_hub import HfApi

    api = api or HfApi(token=token)
    with tempfile.TemporaryDirectory(prefix="bert_kd_push_") as staging:
        folder = push_folder(model_dir, Path(staging) / "model", **{"repo_id": repo_id, **card_options})
        api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
        commit = api.upload_folder(
            repo_id=repo_id,
            repo_type="model",
            folder_path=str(folder),
            commit_message="bert-kd: the model and its card",
        )
    return str(getattr(commit, "commit_url", commit))
