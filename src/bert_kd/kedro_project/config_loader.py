"""The project's config loader: Kedro's ``OmegaConfigLoader`` with ``--params`` merged in an order that
keeps inherited blocks inherited.

``conf/base`` writes every job's ``training`` as an interpolation of the global block
(``student.training: ${merge:${training},{epochs: 4}}``). Kedro merges ``--params`` into the unresolved
config key by key, and OmegaConf resolves an interpolation node the moment a key is merged *into* it. So
``--params student.training.epochs=1,training.batch_size=16`` froze ``student.training`` before the global
batch size arrived (batch 32), while the same two keys in the other order gave batch 16: a silent,
order-dependent config. Here the ``--params`` keys that go through an interpolation node are merged after
all the others, so the node is resolved with every plain override in place, whatever the order.

It also refuses, as one user-error block each, what Kedro would follow silently or answer with a long
traceback: an ``--env`` that is not a folder inside ``conf/`` (``--env ../../somewhere`` used to fall
back on ``base`` without a word; ``--env papr`` printed a ``MissingConfigException``), and an
interpolation whose key no file defines (``${trainin}``: an ``InterpolationKeyError`` traceback).

An environment's mapping marked ``replace: true`` replaces the block of ``conf/base`` at its path instead of
being merged into it ([`REPLACE_MARKER`][]): Kedro's soft merge keeps every key of base's block, so an
environment could not switch a ``multi_teacher_configs`` entry to a method that refuses one of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kedro.config import OmegaConfigLoader
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError
from yaml.parser import ParserError

from bert_kd.config.credentials import move_password_to_environment
from bert_kd.config.errors import UserError

#: The key that makes an environment's mapping replace base's block at its path (``okd: {replace: true, method:
#: okd, …}``); the marker itself never reaches the parameters.
REPLACE_MARKER = "replace"


def _plain(config: Any) -> Any:
    return OmegaConf.to_container(config, resolve=False) if isinstance(config, (DictConfig, ListConfig)) else config


def take_replacements(base: Any, env: Any) -> None:
    """Drop, in place, every block of ``base`` that ``env`` marks ``replace: true`` at the same path, and the
    markers from ``env`` (a marker in base alone is dropped too: it replaces nothing)."""
    if not isinstance(env, dict):
        return
    if env.get(REPLACE_MARKER) is True:
        env.pop(REPLACE_MARKER)
        if isinstance(base, dict):
            base.clear()
    for key, value in env.items():
        take_replacements(base.get(key) if isinstance(base, dict) else None, value)
    if isinstance(base, dict) and base.get(REPLACE_MARKER) is True:
        base.pop(REPLACE_MARKER)


def environments(conf_source: str | Path) -> list[str]:
    """The environments a run may name: the folders directly inside ``conf_source`` (hidden ones left out)."""
    root = Path(conf_source)
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) if root.is_dir() else []


def check_environment(conf_source: str | Path, env: str | None) -> None:
    """[`UserError`][] unless ``env`` (``kedro run --env``) names a folder directly inside ``conf_source``."""
    if env is None or not Path(conf_source).is_dir():  # a remote conf_source: Kedro checks it
        return
    known = environments(conf_source)
    if env in known:
        return
    outside = Path(env).name != env or env in ("", ".", "..")
    what = (
        f"--env {env} is a path, not the name of an environment folder inside {conf_source}/"
        if outside
        else f"--env {env}: there is no folder {Path(conf_source) / env}/"
    )
    import difflib

    close = difflib.get_close_matches(env, known, n=1, cutoff=0.6)
    hint = f"did you mean --env {close[0]}? " if close and not outside else ""
    raise UserError(
        what,
        f"--env (or KEDRO_ENV); environments: {', '.join(known) or 'none'}",
        f"{hint}name one of {', '.join(known)}; a new environment is a folder {conf_source}/<name>/ "
        "holding only what differs from base",
    )


def interpolation_error(
    exc: InterpolationResolutionError, config_per_file: Mapping[Path, DictConfig], base: Mapping[Path, DictConfig] = {}
) -> UserError:
    """One block for an interpolation that cannot be resolved, naming the file and line that use it; ``base``:
    conf/base's files when the failing files are another environment's (Kedro resolves each environment's
    files on their own, so ``${training}`` in conf/local cannot reach conf/base's ``training``)."""
    import re

    message = getattr(exc, "msg", str(exc)).splitlines()[0]
    full_key = getattr(exc, "full_key", None)
    missing = re.search(r"Interpolation key '([^']+)' not found", message)
    where = None
    if missing:
        needle = re.compile(r"\$\{[^}]*\b" + re.escape(missing.group(1)) + r"\b")
        for path in config_per_file:
            try:
                lines = Path(path).read_text(encoding="utf-8").splitlines()
            except OSError:
                continue
            line = next((i for i, text in enumerate(lines, 1) if needle.search(text)), None)
            if line is not None:
                where = f"{path}:{line}"
                break
    where = where or ", ".join(str(p) for p in config_per_file)
    key = f" (in {full_key})" if full_key else ""
    in_base = missing and any(
        OmegaConf.select(config, missing.group(1), default=None, throw_on_resolution_failure=False) is not None
        for config in base.values()
    )
    if in_base:
        name = missing.group(1)
        return UserError(
            f"the configuration cannot be resolved: {message}{key}; {name} is defined in conf/base, but "
            "interpolations do not cross environments (Kedro resolves each environment's files on their own, "
            "then merges them)",
            where,
            f"in this environment, give the keys that differ only (they are merged over conf/base's block), or "
            f"write the value of {name} out instead of ${{{name}}}",
        )
    fix = (
        f"define {missing.group(1)} in conf/base (or the environment's files) or correct the name in the ${{…}}"
        if missing
        else "correct the ${…} expression"
    )
    return UserError(f"the configuration cannot be resolved: {message}{key}", where, fix)


def yaml_error(exc: Exception) -> UserError | None:
    """One block for a conf file that is not valid YAML, naming the file, its line and column (Kedro's
    ``ParserError`` counts lines from 0 and wraps YAML's own reason); None for another error."""
    import re

    found = re.search(r"Invalid YAML or JSON file (.+), unable to read line (\d+), position (\d+)\.", str(exc))
    if found is None:
        return None
    path, line, column = found.group(1), int(found.group(2)) + 1, int(found.group(3)) + 1
    cause = exc.__cause__
    reason = " ".join(str(part) for part in (getattr(cause, "context", None), getattr(cause, "problem", None)) if part)
    return UserError(
        f"{path} is not valid YAML" + (f": {reason}" if reason else ""),
        f"{path}:{line}:{column}",
        "correct the file at that line (a missing bracket or quote, a tab in the indentation, a key without its colon)",
    )


def split_runtime_params(config: DictConfig, params: Mapping[str, Any]) -> tuple[dict, dict]:
    """``(plain, through)``: the nested ``params`` split into the keys whose path stays outside every
    interpolation node of ``config`` (unresolved) and the sub-blocks merged *into* an interpolation node
    (e.g. ``{"student": {"training": {"epochs": 1}}}`` when ``student.training`` is ``${merge:…}``)."""
    plain: dict = {}
    through: dict = {}

    def walk(node: DictConfig | None, values: Mapping, plain_at: dict, through_at: dict) -> None:
        for key, value in values.items():
            inside = isinstance(node, DictConfig) and key in node
            if isinstance(value, Mapping) and value and inside and OmegaConf.is_interpolation(node, key):
                through_at[key] = value
            elif isinstance(value, Mapping) and value and inside and isinstance(node[key], DictConfig):
                walk(node[key], value, plain_at.setdefault(key, {}), through_at.setdefault(key, {}))
                for part in (plain_at, through_at):
                    if not part[key]:
                        del part[key]
            else:
                plain_at[key] = value

    walk(config, params, plain, through)
    return plain, through


#: The shared training block every job's ``training`` derives from in conf/base.
SHARED_TRAINING = "training"


def job_training_paths(config: DictConfig) -> list[tuple]:
    """Paths of the job ``training`` blocks that ``config`` (unresolved) derives from the shared block:
    ``${training}``, ``${merge:${training},{…}}``, or a reference to another such block
    (``multi_teachers[0].training: ${teacher.training}``). Blocks written out in full (the reproduce
    tables') are not among them."""
    candidates: dict[tuple, str] = {}

    def walk(node, path: tuple) -> None:
        items = node.items_ex(resolve=False) if isinstance(node, DictConfig) else enumerate(node)
        for key, _ in items:
            if isinstance(node, DictConfig) and OmegaConf.is_interpolation(node, str(key)):
                if key == SHARED_TRAINING and path:
                    candidates[(*path, key)] = node._get_node(key)._value()
                continue
            child = node._get_node(key) if isinstance(node, DictConfig) else node[key]
            if isinstance(child, (DictConfig, ListConfig)):
                walk(child, (*path, key))

    walk(config, ())
    derived: set[tuple] = set()
    changed = True
    while changed:
        changed = False
        for path, text in candidates.items():
            names = {f"${{{SHARED_TRAINING}}}"} | {"${" + dotted_path(other) + "}" for other in derived}
            if path not in derived and any(name in text for name in names):
                derived.add(path)
                changed = True
    return sorted(derived, key=str)


def dotted_path(path: tuple) -> str:
    """``("multi_teachers", 0, "training")`` → ``multi_teachers[0].training`` (OmegaConf's own spelling)."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def apply_shared_training(config: dict, paths: list[tuple], runtime_params: Mapping) -> None:
    """The one precedence rule of training settings, applied to the resolved ``config``: the command line
    over conf, and a job's own key over the shared block. A ``--params training.<key>`` therefore reaches
    every job block in ``paths`` (also one whose conf pins that key), unless ``--params <job>.training.<key>``
    sets it for that job."""
    runtime = OmegaConf.to_container(OmegaConf.create(dict(runtime_params)))
    shared = runtime.get(SHARED_TRAINING)
    if not isinstance(shared, Mapping) or not shared:
        return
    for path in paths:
        block, own = config, runtime
        for part in path:
            block = block[part] if isinstance(block, (dict, list)) and _has(block, part) else None
            own = own.get(part) if isinstance(own, Mapping) else None
        if not isinstance(block, dict):
            continue
        for key, value in shared.items():
            if not (isinstance(own, Mapping) and key in own):
                block[key] = value


def _has(container, part) -> bool:
    return part in container if isinstance(container, dict) else isinstance(part, int) and part < len(container)


class ProjectConfigLoader(OmegaConfigLoader):
    """``OmegaConfigLoader`` whose ``parameters`` take ``--params`` in two passes (see the module): the
    plain keys first, then the keys inside interpolated blocks."""

    def __init__(self, conf_source: str | Path, env: str | None = None, *args, **kwargs) -> None:
        check_environment(conf_source, env)
        self._job_training_paths: list[tuple] = []
        super().__init__(conf_source, env, *args, **kwargs)

    def __getitem__(self, key: str) -> dict[str, Any]:
        self._job_training_paths = []
        config = super().__getitem__(key)
        if key == "parameters" and self.runtime_params:
            apply_shared_training(config, self._job_training_paths, self.runtime_params)
        if key == "parameters":  # a study URL's password never reaches MLflow, trial JSONs or tables
            move_password_to_environment(config)
        return config

    @staticmethod
    def _soft_merge(config: dict[str, Any], env_config: dict[str, Any], env_path: str | None = None) -> Any:
        """Kedro's soft merge, except that an environment's block marked ``replace: true`` replaces base's."""
        config, env_config = _plain(config), _plain(env_config)
        take_replacements(config, env_config)
        return OmegaConf.to_container(OmegaConf.unsafe_merge(config, env_config))

    def _read_raw_config(self, key: str):
        try:
            raw = super()._read_raw_config(key)
        except ParserError as exc:
            raise (yaml_error(exc) or exc) from exc
        self._base_files = raw[0]  # conf/base's files: what an interpolation error of another environment checks
        return raw

    def _merge_and_resolve(self, key: str, config_per_file: dict[Path, DictConfig]) -> dict[str, Any]:
        if key == "parameters" and not self._job_training_paths and config_per_file:
            merged = OmegaConf.unsafe_merge(*config_per_file.values())  # conf/base, read first: its derived blocks
            self._job_training_paths = job_training_paths(merged)
        try:
            return self._merge_and_resolve_params(key, config_per_file)
        except InterpolationResolutionError as exc:
            base = getattr(self, "_base_files", {})
            other_env = base is not config_per_file and not set(config_per_file) & set(base)
            raise interpolation_error(exc, config_per_file, base if other_env else {}) from exc

    def _merge_and_resolve_params(self, key: str, config_per_file: dict[Path, DictConfig]) -> dict[str, Any]:
        if key != "parameters" or not self.runtime_params or not config_per_file:
            return super()._merge_and_resolve(key, config_per_file)
        merged = OmegaConf.unsafe_merge(*config_per_file.values())
        plain, through = split_runtime_params(merged, OmegaConf.to_container(OmegaConf.create(self.runtime_params)))
        return OmegaConf.to_container(OmegaConf.unsafe_merge(merged, plain, through), resolve=True)
