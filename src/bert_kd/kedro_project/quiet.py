"""Silence third-party warnings every ``kedro`` command would otherwise print, and Kedro's
per-dataset "Loading data from …"/"Saving data to …" INFO lines (most of a run's log; set
``BERT_KD_LOG_DATASETS=1`` to see them again).

Each entry names one known message from a library we do not control; anything else still shows.
"""

from __future__ import annotations

import logging
import os
import re
import warnings

#: (message regex, category) of warnings that tell the user nothing actionable.
KNOWN_NOISE: tuple[tuple[str, type[Warning]], ...] = (
    # MLflow inspects every PythonModel subclass on import (kedro-mlflow's KedroPipelineModel).
    (r"Add type hints to the `predict` method", UserWarning),
    # Kedro 1.7's config loader and kedro-mlflow 2.0 still call OmegaConf's deprecated API.
    (r"register_new_resolver\(\) is deprecated", UserWarning),
    # kedro-viz 12 still answers with FastAPI's ORJSONResponse (a block of deprecation text on `kedro viz build`).
    (r"ORJSONResponse is deprecated", Warning),
    # Namespaced datasets (``alp_kd.alp.student_metrics``) read by the nodes gathering a comparison's rows:
    # the dot *is* the namespace, which is how Kedro modular pipelines expose their outputs.
    (r"One or more dataset names contain '\.' characters", UserWarning),
)


class KnownNoiseFilter(logging.Filter):
    """Drop ``py.warnings`` records of [`KNOWN_NOISE`][] (Kedro routes warnings into logging;
    MLflow re-enables its own with ``simplefilter("once")``, so ``filterwarnings`` alone misses it)."""

    pattern = re.compile("|".join(message for message, _ in KNOWN_NOISE))

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.pattern.search(record.getMessage())


def silence_known_warnings() -> None:
    """Install the [`KNOWN_NOISE`][] filters (idempotent)."""
    for message, category in KNOWN_NOISE:
        warnings.filterwarnings("ignore", message=f".*{message}", category=category)
    logger = logging.getLogger("py.warnings")
    if not any(isinstance(f, KnownNoiseFilter) for f in logger.filters):
        logger.addFilter(KnownNoiseFilter())


#: Environment variable that brings Kedro's per-dataset load/save INFO lines back (``1``).
LOG_DATASETS_ENV = "BERT_KD_LOG_DATASETS"
#: The logger of Kedro's data catalog (it writes one line per dataset load and save).
CATALOG_LOGGER = "kedro.io.data_catalog"


class DatasetIOFilter(logging.Filter):
    """Drop the catalog's ``Loading data from``/``Saving data to`` INFO lines, unless
    [`LOG_DATASETS_ENV`][] is set when the record is made; warnings and errors always pass."""

    pattern = re.compile(r"^(Loading data from|Saving data to) ")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.INFO or os.environ.get(LOG_DATASETS_ENV, "").strip() in ("1", "true", "yes"):
            return True
        return not self.pattern.match(str(record.msg))


def quiet_dataset_io() -> None:
    """Install [`DatasetIOFilter`][] on Kedro's catalog logger (idempotent)."""
    logger = logging.getLogger(CATALOG_LOGGER)
    if not any(isinstance(f, DatasetIOFilter) for f in logger.filters):
        logger.addFilter(DatasetIOFilter())


def mask_passwords_in_logs() -> None:
    """Every log record, of any logger, with each URL's password masked ([`mask`][config.credentials.mask])
    before a handler sees it: the record factory is wrapped once (idempotent), so a line that quotes a database
    URL (a sweep's storage, a tracking server) never shows its password on the terminal or in a log file."""
    from bert_kd.config.credentials import mask

    factory = logging.getLogRecordFactory()
    if getattr(factory, "masks_passwords", False):
        return

    def masked_record(*args, **kwargs) -> logging.LogRecord:
        record = factory(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is the handler's to report, as without this factory
            return record
        if "@" in message and "://" in message:
            masked = mask(message)
            if masked != message:
                record.msg, record.args = masked, None
        return record

    masked_record.masks_passwords = True
    logging.setLogRecordFactory(masked_record)


# ---------------------------------------------------------------- third-party INFO lines and bars
#: Set (``1``) by ``kedro run -v``: the libraries' INFO lines and progress bars are shown.
VERBOSE_ENV = "BERT_KD_VERBOSE"
#: Loggers of the libraries a run uses, whose INFO lines (Kedro's node lines, kedro-mlflow's run line and
#: resolver, MLflow's database set-up) ``conf/logging.yml`` holds at WARNING; ``kedro run -v`` shows them.
THIRD_PARTY_LOGGERS = ("kedro", "kedro_mlflow", "mlflow", "transformers", "huggingface_hub", "kedro_viz")
#: What the libraries read from the environment when they are imported, quiet and verbose: MLflow's own
#: handler's level, transformers' (its weight-loading LOAD REPORT table is a warning) and the hub's
#: progress bars, which transformers' "Loading weights" and "Writing model shards" bars follow.
LIBRARY_ENV = {
    "MLFLOW_LOGGING_LEVEL": ("WARNING", "INFO"),
    "TRANSFORMERS_VERBOSITY": ("error", "info"),
    "HF_HUB_DISABLE_PROGRESS_BARS": ("1", "0"),
}


def verbose() -> bool:
    """Third-party lines are wanted: ``kedro run -v`` ([`VERBOSE_ENV`][]), or a logging configuration of
    one's own (``KEDRO_LOGGING_CONFIG``), which then decides alone."""
    wanted = os.environ.get(VERBOSE_ENV, "").strip().lower() in ("1", "true", "yes")
    return wanted or bool(os.environ.get("KEDRO_LOGGING_CONFIG"))


def quiet_third_party() -> None:
    """At the default verbosity: the libraries' INFO lines, LOAD REPORT and progress bars left out of the
    terminal (their warnings and errors still shown); nothing changes when [`verbose`][]. Idempotent: called
    when Kedro reads the settings and again once the plugins are imported (``PreflightHook``)."""
    if verbose():
        return
    for name, (quiet, _) in LIBRARY_ENV.items():
        os.environ.setdefault(name, quiet)
    _apply_to_loaded(verbose=False)


def show_third_party() -> None:
    """``kedro run -v``: the libraries' INFO lines and bars back, whichever of them is already imported."""
    os.environ[VERBOSE_ENV] = "1"
    for name, (_, loud) in LIBRARY_ENV.items():
        os.environ[name] = loud
    for name in THIRD_PARTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO)
    _apply_to_loaded(verbose=True)


def _apply_to_loaded(verbose: bool) -> None:
    """The levels and bars of a library imported before the environment was set (it read it already)."""
    import sys

    for name in ("mlflow", "kedro_mlflow"):  # each sets its logger's level when imported
        if name in sys.modules:
            logging.getLogger(name).setLevel(logging.INFO if verbose else logging.WARNING)
    if "transformers" in sys.modules:
        from transformers.utils import logging as transformers_logging

        transformers_logging.set_verbosity_info() if verbose else transformers_logging.set_verbosity_error()
        transformers_logging.enable_progress_bar() if verbose else transformers_logging.disable_progress_bar()
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars, enable_progress_bars

        enable_progress_bars() if verbose else disable_progress_bars()
