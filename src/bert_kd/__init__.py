"""bert-kd: knowledge distillation of BERT-family models on GLUE, as a Kedro project.

``bert_kd.tracking_models`` still names [`bert_kd.tracking.logged_models`][]: MLflow models logged
before the package was laid out in folders record it as their pyfunc ``loader_module``. The alias is
resolved only when that name is imported, so importing bert_kd loads no MLflow. Importing bert_kd
loads no Kedro either: the start-up warning filters are installed where a program starts
(``settings.py`` for every ``kedro`` command, ``__main__.py`` for ``bert-kd``).
"""

import importlib
import importlib.abc
import importlib.util
import sys

#: Old module name → the module that answers to it now.
MODULE_ALIASES = {"bert_kd.tracking_models": "bert_kd.tracking.logged_models"}


class _ModuleAliases(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Import an alias as the module it names (the same module object, under both names)."""

    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if name in MODULE_ALIASES else None

    def create_module(self, spec):
        return importlib.import_module(MODULE_ALIASES[spec.name])

    def exec_module(self, module):
        pass


if not any(isinstance(finder, _ModuleAliases) for finder in sys.meta_path):
    sys.meta_path.append(_ModuleAliases())

__version__ = "0.1"
