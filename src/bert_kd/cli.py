"""Project CLI: ``kedro run`` with readable errors.

Kedro loads ``<package>.cli:cli`` and lets its commands override the built-in ones. ``run`` here
is Kedro's own ``run`` (same options, same behaviour) except that a known user error
([`UserError`][] anywhere in the exception chain: bad parameters, bad data
files, missing models, offline hub) prints one block — what, where, how to fix — and exits with
status 2 without a traceback. The full traceback is appended to ``logs/bert_kd_errors.log``
(``BERT_KD_ERROR_LOG``) and printed too when ``BERT_KD_DEBUG=1``. Other errors keep their traceback.
"""

from __future__ import annotations

import datetime as _dt
import re
import sys
import traceback
from pathlib import Path

import click
from kedro.framework.cli.project import run as kedro_run

from bert_kd.config.credentials import mask
from bert_kd.config.errors import USER_ERROR_EXIT, UserError, debug_enabled, error_log_path, find_user_error


def report_user_error(error: UserError, exc: BaseException, stream=None) -> None:
    """Print ``error``'s block on ``stream`` (stderr) and log ``exc``'s traceback to the log file."""
    stream = stream or sys.stderr
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    log_path = Path(error_log_path())
    logged = None
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("a", encoding="utf-8") as fh:
            fh.write(f"--- {_dt.datetime.now().isoformat(timespec='seconds')} {mask(' '.join(sys.argv))}\n{trace}\n")
        logged = log_path
    except OSError:
        pass
    print(error.block(), file=stream)
    if debug_enabled():
        print(trace, file=stream)
    elif logged is not None:
        print(f"  (traceback in {logged}; BERT_KD_DEBUG=1 prints it here)", file=stream)


def environment_error(exc: BaseException) -> UserError | None:
    """A full or read-only disk, or a damaged SQLite file, met mid-run by code that does not
    name it itself (Kedro's dataset saves, MLflow, Optuna): one block naming the file and the fix."""
    from bert_kd.config.errors import storage_error
    from bert_kd.kedro_project.preflight import damaged_database_error

    filename = next((getattr(e, "filename", None) for e in _chain(exc) if getattr(e, "filename", None)), None)
    # no file named: of the folders the run writes to (the store, data/'s folders, logs/, the temporary folder, the
    # project), the first on a full disk, so a store on its own mount is named, not the project's disk
    return storage_error(exc, filename or written_folder(), writing=False) or damaged_database_error(exc)


def written_folder() -> Path:
    """The folder a run was most likely writing when a full disk named no file: the first of the folders a run
    writes to whose disk is (nearly) full, else the project folder."""
    import tempfile

    from bert_kd.config.errors import full_disk_folder

    data = Path("data")
    folders = sorted(p for p in data.iterdir() if p.is_dir()) if data.is_dir() else []
    store = data / "06_models" / "store"
    candidates = [store, *folders, Path("logs"), Path(tempfile.gettempdir()), Path.cwd()]
    found = full_disk_folder([c.resolve() for c in candidates])
    return found or Path.cwd()


def tracking_down_error(exc: BaseException) -> UserError | None:
    """An MLflow request outside a training job (kedro-mlflow opening its run, the experiment made at start) that
    failed because the tracking server went away: the block of
    [`server_down_error`][tracking.runs.server_down_error]; None for other errors, or when MLflow is not loaded."""
    mlflow = sys.modules.get("mlflow")
    if mlflow is None:
        return None
    from bert_kd.tracking.runs import server_down_error

    return server_down_error(mlflow.get_tracking_uri(), exc)


def unknown_pipeline_error(exc: BaseException) -> UserError | None:
    """Kedro's "Failed to find the pipeline named …" (a ValueError with a traceback) as one block, Kedro's
    suggestions kept; None for other errors."""
    import re

    for error in _chain(exc):
        found = re.match(r"Failed to find the pipeline named '([^']*)'\.", str(error))
        if isinstance(error, ValueError) and found:
            from kedro.framework.project import pipelines

            suggestion = str(error).partition("Did you mean one of these instead?")[2].split()
            names = sorted(name for name in pipelines if name != "__default__")
            hint = f"did you mean {' or '.join(suggestion)}? " if suggestion else ""
            return UserError(
                f"there is no pipeline named {found.group(1)!r}",
                "--pipelines",
                f"{hint}name one of: {', '.join(names)} (or none: the default pipeline)",
            )
    return None


#: Kedro's ValueErrors for a node selection that selects nothing, and the option each comes from.
_SELECTION_ERRORS = (
    ("Pipeline does not contain nodes named", "--nodes", "name nodes of the pipeline (`kedro registry describe`)"),
    ("Pipeline does not contain nodes with the following namespaces", "--namespaces", "name a namespace it has"),
    (
        "Pipeline contains no nodes after applying all provided filters",
        "--tags / --nodes / --from-nodes / --to-nodes / --from-inputs / --to-outputs",
        "give a selection that keeps at least one node (the tags of a node: `kedro registry describe`)",
    ),
)


def node_selection_error(exc: BaseException) -> UserError | None:
    """Kedro's traceback for ``--nodes``/``--tags``/``--namespaces`` that select nothing as one block (Kedro's
    own sentence and suggestions kept); None for other errors."""
    for error in _chain(exc):
        for start, where, fix in _SELECTION_ERRORS:
            if isinstance(error, ValueError) and str(error).startswith(start):
                return UserError(str(error).split(" Please ensure")[0], where, fix)
    return None


def runner_error(runner: str | None) -> UserError | None:
    """The block for a ``--runner`` Kedro cannot load (it raised a traceback); None for a loadable one."""
    if not runner:
        return None
    from kedro.utils import load_obj

    try:
        load_obj(runner, "kedro.runner")
    except (ImportError, AttributeError, ValueError) as exc:  # the UserError is raised, chained to exc
        return UserError(
            f"--runner {runner!r} cannot be loaded ({exc})",
            "--runner",
            "name one of SequentialRunner, ParallelRunner, ThreadRunner, or a class as package.module.Class",
        )
    return None


def _chain(exc: BaseException | None):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def run_guarded(verbose: bool = False, **options):
    """Kedro's ``run`` callback; a [`UserError`][] becomes one block and exit status 2. ``verbose`` (``-v``):
    the libraries' INFO lines and progress bars too ([`bert_kd.kedro_project.quiet.show_third_party`][])."""
    if verbose:
        from bert_kd.kedro_project.quiet import show_third_party

        show_third_party()
    try:
        refused = runner_error(options.get("runner"))
        if refused is not None:
            raise refused
        return kedro_run.callback(**options)
    except Exception as exc:  # noqa: BLE001 - re-raised unless it is a user error
        error = (
            find_user_error(exc)
            or environment_error(exc)
            or tracking_down_error(exc)
            or unknown_pipeline_error(exc)
            or node_selection_error(exc)
        )
        if error is None:
            raise
        report_user_error(error, exc)
        sys.exit(USER_ERROR_EXIT)


def comma_split_list(value: str) -> UserError | None:
    """The user error of ``--params`` whose list was cut by Kedro's comma split
    (``student.layer_selection=[1,9]`` arrives as ``student.layer_selection=[1`` and ``9]``), or of
    an item that is not ``key=value``; None when every item is ``key=value``."""
    items = [item.strip() for item in value.split(",")]
    key, pieces = None, []
    for item in items:
        if "=" in item:
            if key is not None and pieces[1:]:
                break
            key, _, first = item.partition("=")
            key, pieces = key.strip(), [first]
        elif key is not None:
            pieces.append(item)
        else:
            return UserError(
                f"--params item {item!r} is not key=value",
                "--params",
                "write each parameter as key=value, several separated by commas: --params 'task=rte,seed=1'",
            )
    if key is None or len(pieces) < 2:
        return None
    given = ",".join(pieces)
    spaced = space_separated(given) or " ".join(piece.strip("[]() ") for piece in pieces)
    return UserError(
        f"--params {key}={given}: Kedro splits --params on commas, so this list arrived cut in pieces "
        f"({', '.join(repr(p) for p in pieces[1:])} without a key)",
        f"--params {key}",
        f"write a list space-separated, in quotes: --params '{key}={spaced}' (or set it in conf/, where YAML "
        "lists work)",
    )


def space_separated(given: str) -> str | None:
    """The ``--params`` form of a YAML list (what the schema reads back as that list): ``[mask, pos]`` as
    ``mask pos``, a list of lists ``[[1, 12], [2, 12]]`` as ``1:12 2:12``; None when ``given`` is no list."""
    import yaml

    try:
        value = yaml.safe_load(given)
    except yaml.YAMLError:
        return None
    if not isinstance(value, list) or not value:
        return None
    if all(isinstance(item, list) for item in value):
        return " ".join(":".join(str(part) for part in item) for item in value)
    return " ".join(str(item) for item in value)


def split_params(ctx: click.Context, param: click.Parameter, value):
    """Kedro's ``--params`` parser, with one user-error block (exit 2) for a list cut by its comma split."""
    from kedro.framework.cli.utils import _split_params

    if isinstance(value, str) and value:
        error = comma_split_list(value)
        if error is not None:
            try:
                raise error
            except UserError as raised:  # raised, so the error log has its traceback like every other
                report_user_error(raised, raised)
            ctx.exit(USER_ERROR_EXIT)
    return _split_params(ctx, param, value)


def _run_params() -> list[click.Parameter]:
    """Kedro's ``run`` options, ``--params`` parsed by [`split_params`][], and ``-v``."""
    import copy

    params = []
    for option in kedro_run.params:
        if option.name == "params":
            option = copy.copy(option)
            option.callback = split_params
        params.append(option)
    help_ = "show the libraries' INFO lines and progress bars too (Kedro, kedro-mlflow, MLflow, transformers)"
    return [*params, click.Option(["-v", "--verbose"], is_flag=True, help=help_)]


@click.group(name="bert_kd")
def cli() -> None:
    """bert-kd project commands."""


#: Kedro's ``run`` with readable user errors (also what ``bert-kd`` / ``python -m bert_kd`` run).
run = click.Command(
    name="run",
    params=_run_params(),
    callback=run_guarded,
    help=kedro_run.help,
    short_help=kedro_run.short_help,
)
cli.add_command(run)


def _results_group():
    from bert_kd.analysis.cli import results

    return results


#: ``kedro results …`` (also ``bert-kd results …``): readings of committed tables.
cli.add_command(_results_group())


def _mechanisms_command():
    from bert_kd.analysis.mechanisms_cli import mechanisms

    return mechanisms


#: ``bert-kd mechanisms [METHOD ...] [--json]``: each method's mechanism on a controlled case.
cli.add_command(_mechanisms_command())


# ---------------------------------------------------------------- sharing a model: card and push
def _guarded(action):
    """Run ``action()``; a [`UserError`][] prints its block and exits with status 2."""
    try:
        return action()
    except UserError as error:
        report_user_error(error, error)
        sys.exit(USER_ERROR_EXIT)


def model_folder(source: str, key: str, allow_unverified: bool = False) -> tuple[Path, bool]:
    """(the model folder ``source`` names, whether it is a store entry): a folder as given, or an
    MLflow URI (``models:/…``, ``runs:/…``) downloaded, then replaced by its entry in this
    project's store when that holds it (the card then finds the teacher beside it). A folder given by path must
    have a ``manifest.json`` that proves its files unless ``allow_unverified``."""
    from bert_kd.config.errors import ModelNotFoundError
    from bert_kd.experiment.store import STORE_ROOT

    if ":/" not in source:
        folder = Path(source)
        if not (folder / "config.json").is_file():
            raise ModelNotFoundError(
                f"{source} is not a saved model folder (no config.json)",
                key,
                "give a store entry (data/06_models/store/student/<key>) or an MLflow URI (models:/<name>@<alias>, "
                "models:/<name>/<version>, runs:/<run id>/<model name>)",
            )
        if not (folder / "bert_kd.json").is_file():
            raise ModelNotFoundError(
                f"{source} is a saved model but not one bert-kd made (no bert_kd.json): its card would say nothing true",
                key,
                "give a store entry (data/06_models/store/student/<key>) or an MLflow URI of a bert-kd model",
            )
        if allow_unverified and not (folder / "manifest.json").is_file():
            click.echo(f"warning: {folder} has no manifest.json: shared unverified (--allow-unverified)", err=True)
        check_entry(folder, key, require_manifest=not allow_unverified)
        return folder, True
    from bert_kd.experiment.tracker import discard_download, model_sources
    from bert_kd.tracking import use_mlflow

    use_mlflow()  # `bert-kd card|push` load no Kedro settings: MLflow resolves the URI here
    downloaded = model_sources().local_directory(source, key)
    import json

    info_file = downloaded / "bert_kd.json"
    info = json.loads(info_file.read_text(encoding="utf-8")) if info_file.is_file() else {}
    role, entry_key = str(info.get("role", "")), str(info.get("key", ""))
    if role and entry_key:
        from bert_kd.experiment.jobs import SCHEMA_VERSIONS

        if role not in SCHEMA_VERSIONS or not re.fullmatch(r"[0-9a-f]{64}", entry_key):
            discard_download(downloaded)
            raise UserError(
                f"{source}'s bert_kd.json names role {role!r} and key {entry_key[:70]!r}, which are no store entry",
                key,
                f"a model's role is one of {', '.join(sorted(SCHEMA_VERSIONS))} and its key 64 hex digits: the file "
                "was edited; use the model's store folder instead",
            )
        stored = STORE_ROOT / role / entry_key
        if (stored / "config.json").is_file():
            discard_download(downloaded)
            check_entry(stored, key)
            return stored, True
    check_entry(downloaded, key)
    return downloaded, False


def check_entry(folder: Path, key: str, require_manifest: bool = False) -> None:
    """The store check `evaluate` runs, for ``card`` and ``push`` too: a folder with a ``manifest.json`` is
    shared only when the manifest proves its files (tampered weights or an edited ``bert_kd.json`` would become a
    public claim under the old score). ``require_manifest``: a folder without one is refused too (deleting the
    manifest of an edited entry would otherwise turn the check off); ``--allow-unverified`` shares it anyway, with
    a warning."""
    from bert_kd.config.errors import DamagedModelError
    from bert_kd.core.files import MANIFEST
    from bert_kd.experiment.jobs import store_entry_problem
    from bert_kd.experiment.tracker import discard_download

    if not (folder / MANIFEST).is_file():
        if require_manifest:
            raise DamagedModelError(
                f"{folder} has no {MANIFEST}: nothing proves its weights and bert_kd.json are as trained",
                key,
                "share the model's store entry (data/06_models/store/<role>/<key>, written with its manifest), or pass "
                "--allow-unverified to share this folder as it is, unchecked",
            )
        return
    problem = store_entry_problem(folder)
    if problem is not None:
        discard_download(folder)
        raise DamagedModelError(
            f"{folder} does not match its manifest: {problem}",
            key,
            "share a model whose files are as trained: re-run the pipeline that trains it (a damaged store entry is "
            "moved aside and retrained), or restore the entry",
        )


def _run_link(folder: Path) -> str | None:
    from bert_kd.experiment.lineage import Lineage

    run_id = Lineage.read(folder).run_id
    if not run_id:
        return None
    from mlflow import MlflowClient

    from bert_kd.tracking.logged_models import run_link

    return run_link(run_id, MlflowClient())


@cli.command(name="card")
@click.argument("source")
@click.option("--output", type=click.Path(dir_okay=False), default=None, help="where to write (default: see below)")
@click.option("--license", "license_", default=None, help="the card's license (default apache-2.0)")
@click.option("--allow-unverified", is_flag=True, help="write the card of a folder without manifest.json, unchecked")
def card(source: str, output: str | None, license_: str | None, allow_unverified: bool) -> None:
    """Write the Hugging Face model card (README.md) of SOURCE: a store folder or an MLflow model URI.

    Written into the store folder (a URI whose model is in this project's store: into that entry),
    else to --output (default data/08_reporting/model_cards/<key>/README.md)."""
    from bert_kd.experiment.model_card import DEFAULT_LICENSE, write_model_card
    from bert_kd.experiment.tracker import discard_download

    def write() -> None:
        folder, stored = model_folder(source, "bert-kd card SOURCE", allow_unverified)
        try:
            target = output
            if target is None and not stored:
                target = Path("data/08_reporting/model_cards") / folder.name / "README.md"
            check_not_a_foreign_card(Path(target) if target else folder / "README.md")
            written = write_model_card(folder, target, run_link=_run_link(folder), license=license_ or DEFAULT_LICENSE)
        finally:
            if not stored:
                discard_download(folder)
        click.echo(f"model card: {written}")

    _guarded(write)


def check_not_a_foreign_card(path: Path) -> None:
    """A ``README.md`` that bert-kd did not write (its card header has no ``bert-kd`` tag) is the user's own: it is
    never replaced."""
    if not path.is_file():
        return
    from huggingface_hub import ModelCard

    try:
        tags = ModelCard(path.read_text(encoding="utf-8")).data.tags or []
    except Exception:  # noqa: BLE001 - any README the card parser cannot read is not one bert-kd wrote
        tags = []
    if "bert-kd" not in tags:
        raise UserError(
            f"{path} exists and is not a card bert-kd wrote: it is left as it is",
            "bert-kd card SOURCE",
            "write the card elsewhere with --output PATH, or move your README.md away first",
        )


@cli.command(name="push")
@click.argument("source")
@click.argument("repo_id")
@click.option("--dry-run", is_flag=True, help="write the folder that would be pushed, push nothing")
@click.option("--to", "target", type=click.Path(file_okay=False), default=None, help="--dry-run's folder")
@click.option("--private", is_flag=True, help="create the hub repository private")
@click.option("--license", "license_", default=None, help="the card's license (default apache-2.0)")
@click.option("--allow-unverified", is_flag=True, help="push a folder without manifest.json, unchecked")
def push(source: str, repo_id: str, **options) -> None:
    """Upload SOURCE (a store folder or an MLflow model URI) with its model card to the hub as REPO_ID.

    --dry-run writes exactly the folder it would upload to --to (default
    data/08_reporting/hub/<repo id with / as __>) and uploads nothing."""
    from bert_kd.experiment.hub import check_repo_id
    from bert_kd.experiment.tracker import discard_download

    def run_push() -> None:
        check_repo_id(repo_id)
        folder, stored = model_folder(source, "bert-kd push SOURCE", options["allow_unverified"])
        try:
            if options["dry_run"]:
                _dry_run_push(folder, repo_id, options)
            else:
                _push_to_hub(folder, source, repo_id, options)
        finally:
            if not stored:
                discard_download(folder)

    _guarded(run_push)


def _card_options(folder: Path, options: dict) -> dict:
    """The card's run link and licence (``push_folder`` and ``push_to_hub`` put the repository id in its snippet)."""
    from bert_kd.experiment.model_card import DEFAULT_LICENSE

    return {"run_link": _run_link(folder), "license": options["license_"] or DEFAULT_LICENSE}


def _dry_run_push(folder: Path, repo_id: str, options: dict) -> None:
    """``push --dry-run``: the folder that would be pushed, written to ``--to``."""
    from bert_kd.config.errors import storage_error
    from bert_kd.experiment.hub import push_folder

    where = Path(options["target"] or Path("data/08_reporting/hub") / repo_id.replace("/", "__"))
    blocked = next((p for p in (where, *where.parents) if p.exists() and not p.is_dir()), None)
    if blocked is not None:
        raise UserError(f"{blocked} is a file, so {where} cannot be a folder", "--to", "give a folder path")
    if where.exists() and any(where.iterdir()):
        raise UserError(f"{where} is not empty", "--to", "give a new folder (--to PATH) or remove that one")
    try:
        push_folder(folder, where, repo_id=repo_id, **_card_options(folder, options))
    except OSError as exc:
        raise (storage_error(exc, where, writing=True) or exc) from exc
    click.echo(f"dry run: the folder that would be pushed to {repo_id}: {where}")


def _push_to_hub(folder: Path, source: str, repo_id: str, options: dict) -> None:
    """The upload; a full disk where it is staged (the temporary folder), or the hub refusing it, is one block."""
    import tempfile

    from bert_kd.config.errors import storage_error
    from bert_kd.experiment.hub import push_to_hub

    try:
        url = push_to_hub(folder, repo_id, private=options["private"], **_card_options(folder, options))
    except Exception as exc:  # noqa: BLE001 - offline, no token, no rights: one block, exit 2
        if isinstance(exc, UserError):
            raise
        full = storage_error(exc, Path(tempfile.gettempdir()), writing=True)  # the folder staged for upload
        if full is not None:
            raise full from exc
        raise UserError(
            f"the push of {source} to {repo_id} failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}",
            f"hub repository {repo_id}",
            "log in (`hf auth login` or HF_TOKEN) with write access to that namespace, and be online "
            "(HF_HUB_OFFLINE unset); `--dry-run` writes the folder without pushing",
        ) from exc
    click.echo(f"pushed {source} to {repo_id}: {url}")
