"""Re-export of :mod:`bert_kd.mapping` (layer mappings live outside ``distill`` so that
:mod:`bert_kd.models` can use them for student initialisation)."""

from bert_kd.mapping import STRATEGIES, Mapping, check_strategy, connected_layers, layer_map

__all__ = ["STRATEGIES", "Mapping", "check_strategy", "connected_layers", "layer_map"]
