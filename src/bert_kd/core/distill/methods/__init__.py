"""Distillation methods, registered by name.

Importing this package imports every module under it ([`discover_methods`][]), so a new
method is one module here with a [`register_method`][] class and one recipe row in
``conf/base/parameters_distill.yml`` (its ``distill_<row>`` pipeline is derived from the row).
"""

import importlib
import pkgutil

from bert_kd.core.distill.methods.base import (
    METHODS,
    Method,
    build_method,
    method_key_material,
    recipe_key_material,
    recipe_models,
    register_method,
)

__all__ = [
    "METHODS",
    "Method",
    "build_method",
    "discover_methods",
    "method_key_material",
    "recipe_key_material",
    "recipe_models",
    "register_method",
]


def discover_methods() -> dict[str, type[Method]]:
    """Import every module of this package (subpackages included) so that each
    ``@register_method`` class is in `METHODS`; returns the registry."""
    for module in pkgutil.walk_packages(__path__, prefix=f"{__name__}."):
        importlib.import_module(module.name)
    return METHODS


discover_methods()
