"""Project settings. There is no need to edit this file unless you want to change values
from the Kedro defaults. For further information, including these default values, see
https://docs.kedro.org/en/stable/configure/configuration_basics/#configuration"""

# Kedro imports this module first, for every command: the known third-party warnings, Kedro's
# per-dataset load/save lines and the libraries' INFO lines and bars are silenced here, and every log line's
# URL passwords masked, before any plugin loads (bert_kd.kedro_project.quiet).
from bert_kd.kedro_project.quiet import (
    mask_passwords_in_logs,
    quiet_dataset_io,
    quiet_third_party,
    silence_known_warnings,
)

silence_known_warnings()
quiet_dataset_io()
quiet_third_party()  # the libraries' INFO lines and bars: `kedro run -v` (conf/logging.yml holds their loggers)
mask_passwords_in_logs()

# Instantiated project hooks.
# For example, after creating a hooks.py and defining a ProjectHooks class there, do
# from bert_kd.kedro_project.hooks import ProjectHooks
# Hooks are executed in a Last-In-First-Out (LIFO) order.
from bert_kd.kedro_project.hooks import (  # noqa: E402
    ClosingSummaryHook,
    PreflightHook,
    ValidateParametersHook,
)
from bert_kd.kedro_project.progress import JobProgressHook  # noqa: E402
from bert_kd.kedro_project.reproduce_run import ReproduceRunHook  # noqa: E402
from bert_kd.kedro_project.run_params import CredentialsHook  # noqa: E402
from bert_kd.kedro_project.threads import ThreadsHook  # noqa: E402
from bert_kd.tracking import use_mlflow  # noqa: E402
from bert_kd.tracking.kedro_hooks import ParentRunHook  # noqa: E402
from bert_kd.tracking.run_status import RunStatusHook  # noqa: E402

# The program's tracker: the job path, the report nodes and model URIs report to MLflow
# (bert_kd.experiment.tracker holds the interfaces; importing it chooses nothing).
use_mlflow()

# kedro-mlflow's own hook is auto-registered (after these, so it runs before them); `tracking.enabled: false`
# unregisters it for the run (bert_kd.kedro_project.hooks.silence_kedro_mlflow).
HOOKS = (
    CredentialsHook(),
    PreflightHook(),
    ValidateParametersHook(),
    ParentRunHook(),
    RunStatusHook(),
    ReproduceRunHook(),
    JobProgressHook(),
    ThreadsHook(),
    ClosingSummaryHook(),
)

# Several processes (torchrun / accelerate launch): only rank 0 opens MLflow (kedro-mlflow's hook
# opens a run and a SQLite store in every process) and writes catalog outputs.
import os  # noqa: E402

if int(os.environ.get("RANK", "0") or 0) != 0:
    from bert_kd.kedro_project.datasets import rank_zero_catalog_class

    # Installed plugins for which to disable hook auto-registration
    DISABLE_HOOKS_FOR_PLUGINS = ("kedro_mlflow", "kedro-mlflow")  # as its metadata spells it, and as pip does
    DATA_CATALOG_CLASS = rank_zero_catalog_class()

# Class that manages the KedroSession: its id, the save version of every versioned dataset of the
# run, gets a per-run unique part, so two runs started in the same millisecond never collide.
from bert_kd.kedro_project.session import UniqueVersionSession  # noqa: E402

SESSION_CLASS = UniqueVersionSession

# Class that manages storing KedroSession data.
# from kedro.framework.session.store import BaseSessionStore
# SESSION_STORE_CLASS = BaseSessionStore
# Keyword arguments to pass to the `SESSION_STORE_CLASS` constructor.
# SESSION_STORE_ARGS = {
#     "path": "./sessions"
# }

# Directory that holds configuration.
# CONF_SOURCE = "conf"

# Class that manages how configuration is loaded: OmegaConfigLoader, with `--params` keys inside an
# interpolated block (e.g. student.training.epochs) merged after the plain ones, whatever their order.
from bert_kd.kedro_project.config_loader import ProjectConfigLoader  # noqa: E402

CONFIG_LOADER_CLASS = ProjectConfigLoader

# Keyword arguments to pass to the `CONFIG_LOADER_CLASS` constructor.


def _env(name: str, default: str | None = None) -> str | None:
    """``${env:NAME,default}`` in any config file (Kedro allows ``oc.env`` only in credentials)."""
    return os.environ.get(name) or default


def _merge(*blocks):
    """``${merge:${training},{learning_rate: 2.0e-4}}``: a shared block with a few keys changed."""
    from omegaconf import OmegaConf

    return OmegaConf.merge(*blocks)


CONFIG_LOADER_ARGS = {
    "base_env": "base",
    "default_run_env": "local",
    "custom_resolvers": {"env": _env, "merge": _merge},
    # conf/<env> states only what differs from conf/base: nested keys are merged, not replaced.
    "merge_strategy": {"parameters": "soft"},
    # "config_patterns": {
    #     "spark" : ["spark*/"],
    #     "parameters": ["parameters*", "parameters*/**", "**/parameters*"],
    # }
}

# Class that manages Kedro's library components.
# from kedro.framework.context import KedroContext
# CONTEXT_CLASS = KedroContext

# Class that manages the Data Catalog.
# from kedro.io import DataCatalog
# DATA_CATALOG_CLASS = DataCatalog
