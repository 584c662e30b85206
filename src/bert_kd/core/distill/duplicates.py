"""Rows of a comparison that are one job: the same layers connected with the same weights.

With a 2-layer student of a 6-layer teacher, ALP's ``all``, ``buckets_no`` and ``buckets_po`` maps all
connect student layer 1 to teacher layers 1–6 (and leave layer 2 unconnected), and CKD-NO and CKD-PO
do the same: the rows differ in name only. [`same_jobs`][] finds such rows from the recipes as the
training resolves them, before anything is trained, so a comparison trains each job once and shows
the other rows as "same job as <row>".
"""

from __future__ import annotations

import json
from typing import Mapping

from bert_kd.core.distill.methods.base import method_class
from bert_kd.core.distill.methods.layerwise import CLSLayerMethod
from bert_kd.core.layer_maps import layer_map


def effective_recipe(recipe: Mapping, n_teacher: int, n_student: int) -> dict:
    """``recipe`` as the training reads it: a [CLS]-layer method's (PKD, CKD, ALP) ``mapping`` replaced
    by the teacher layers of each student layer ([`bert_kd.core.layer_maps.layer_map`][]); other recipes
    as given (a mapping that does not resolve is left as given: validation reports it)."""
    recipe = dict(recipe)
    try:
        cls = method_class(recipe)
    except ValueError:
        return recipe
    if issubclass(cls, CLSLayerMethod):
        try:
            recipe["mapping"] = layer_map(recipe.get("mapping") or cls.default_mapping, n_teacher, n_student)
        except ValueError:
            pass
    return recipe


def same_jobs(recipes: Mapping[str, Mapping], n_teacher: int, n_student: int) -> dict[str, str]:
    """Row → the row whose job it is, for the rows of ``recipes`` whose effective recipes are equal;
    each group is represented by the row named after its method (``alp``, ``ckd``) if it has one,
    else by its first row."""
    groups: dict[str, list[str]] = {}
    for row, recipe in recipes.items():
        identity = json.dumps(effective_recipe(recipe, n_teacher, n_student), sort_keys=True, default=str)
        groups.setdefault(identity, []).append(row)
    same: dict[str, str] = {}
    for rows in groups.values():
        first = next((r for r in rows if r == (recipes[r] or {}).get("method")), rows[0])
        same.update({row: first for row in rows if row != first})
    return same
