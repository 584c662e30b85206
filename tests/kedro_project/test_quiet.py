import logging
import warnings

from bert_kd.kedro_project.quiet import KnownNoiseFilter, silence_known_warnings


def _record(message: str) -> logging.LogRecord:
    return logging.LogRecord("py.warnings", logging.WARNING, __file__, 1, message, None, None)


def test_filter_drops_known_noise_and_keeps_the_rest():
    noise = KnownNoiseFilter()
    assert not noise.filter(_record("x.py:1: UserWarning: \x1b[33mAdd type hints to the `predict` method to enable"))
    assert not noise.filter(_record("y.py:2: UserWarning: register_new_resolver() is deprecated and will be removed"))
    assert noise.filter(_record("z.py:3: UserWarning: the teacher was trained on another task"))


def test_known_warnings_are_ignored_but_others_still_raise():
    silence_known_warnings()
    with warnings.catch_warnings(record=True) as caught:
        warnings.filterwarnings("always", message="keep me")
        warnings.warn("One or more dataset names contain '.' characters, which is not recommended", UserWarning)
        warnings.warn("keep me", UserWarning)
    assert [str(w.message) for w in caught] == ["keep me"]


def _catalog_record(message: str, level: int = logging.INFO) -> logging.LogRecord:
    return logging.LogRecord(
        "kedro.io.data_catalog", level, __file__, 1, message, ("alp_kd.alp.student", "MemoryDataset"), None
    )


def test_kedros_per_dataset_lines_are_quiet_unless_asked_for(monkeypatch):
    from bert_kd.kedro_project.quiet import LOG_DATASETS_ENV, DatasetIOFilter

    quiet = DatasetIOFilter()
    monkeypatch.delenv(LOG_DATASETS_ENV, raising=False)
    assert not quiet.filter(_catalog_record("Loading data from %s (%s)..."))
    assert not quiet.filter(_catalog_record("Saving data to %s (%s)..."))
    assert quiet.filter(_catalog_record("Loading data from %s (%s)...", logging.WARNING))  # never a warning
    assert quiet.filter(_catalog_record("Dataset %s not found"))
    monkeypatch.setenv(LOG_DATASETS_ENV, "1")
    assert quiet.filter(_catalog_record("Loading data from %s (%s)..."))


def test_the_filter_is_on_kedros_catalog_logger_once_the_project_settings_are_imported():
    import bert_kd.settings  # noqa: F401 - what Kedro imports first, for every command
    from bert_kd.kedro_project.quiet import CATALOG_LOGGER, DatasetIOFilter, quiet_dataset_io

    quiet_dataset_io()
    assert sum(isinstance(f, DatasetIOFilter) for f in logging.getLogger(CATALOG_LOGGER).filters) == 1


def test_a_log_line_quoting_a_url_shows_no_password_whichever_logger_writes_it(caplog):
    import bert_kd.settings  # noqa: F401 - installs the masking record factory, as for every Kedro command
    from bert_kd.kedro_project.quiet import mask_passwords_in_logs

    mask_passwords_in_logs()  # idempotent: a second call wraps nothing twice
    assert getattr(logging.getLogRecordFactory(), "masks_passwords", False)
    with caplog.at_level(logging.INFO):
        logging.getLogger("some.library").info("connecting to %s", "postgresql+psycopg://u:s3cret@db:5433/x")
        logging.getLogger("bert_kd.sweeps").warning("plain line with 100% and no URL")
    assert [r.getMessage() for r in caplog.records] == [
        "connecting to postgresql+psycopg://u:***@db:5433/x",
        "plain line with 100% and no URL",
    ]
