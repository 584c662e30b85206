"""Distillation methods, registered by name. Importing this package registers all of them."""

from bert_kd.distill.methods.base import METHODS, Method, build_method, register_method
from bert_kd.distill.methods import layerwise, prediction, tinybert  # noqa: F401  (registration)

__all__ = ["METHODS", "Method", "build_method", "register_method"]
from bert_kd.distill.methods import multi_teacher  # noqa: F401,E402  (registration)
from bert_kd.distill.methods import ted  # noqa: F401,E402  (TED, KD and LWD registration)
