import logging
import warnings

from bert_kd.quiet import KnownNoiseFilter, silence_known_warnings


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
