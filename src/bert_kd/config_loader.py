"""The project's config loader: Kedro's ``OmegaConfigLoader`` with ``--params`` merged in an order that
keeps inherited blocks inherited.

``conf/base`` writes every job's ``training`` as an interpolation of the global block
(``student.training: ${merge:${training},{epochs: 4}}``). Kedro merges ``--params`` into the unresolved
config key by key, and OmegaConf resolves an interpolation node the moment a key is merged *into* it. So
``--params student.training.epochs=1,training.batch_size=16`` froze ``student.training`` before the global
batch size arrived (batch 32), while the same two keys in the other order gave batch 16: a silent,
order-dependent config. Here the ``--params`` keys that go through an interpolation node are merged after
all the others, so the node is resolved with every plain override in place, whatever the order.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kedro.config import OmegaConfigLoader
from omegaconf import DictConfig, OmegaConf


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


class ProjectConfigLoader(OmegaConfigLoader):
    """``OmegaConfigLoader`` whose ``parameters`` take ``--params`` in two passes (see the module): the
    plain keys first, then the keys inside interpolated blocks."""

    def _merge_and_resolve(self, key: str, config_per_file: dict[Path, DictConfig]) -> dict[str, Any]:
        if key != "parameters" or not self.runtime_params or not config_per_file:
            return super()._merge_and_resolve(key, config_per_file)
        merged = OmegaConf.unsafe_merge(*config_per_file.values())
        plain, through = split_runtime_params(merged, OmegaConf.to_container(OmegaConf.create(self.runtime_params)))
        return OmegaConf.to_container(OmegaConf.unsafe_merge(merged, plain, through), resolve=True)
