"""What a sweep's study records with each trial (Optuna user attributes), and which of its finished trials a
run may reuse: those made under the identity asked for now, with the results folder, when there is one, deciding
first."""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Callable, Mapping, Sequence

import optuna
from optuna.trial import TrialState

from bert_kd.sweeps.spec import TrialSpec

log = logging.getLogger(__name__)

GRID_PARAM = "trial"
RESULT_ATTR = "result"
KEY_ATTR = "key"
IDENTITY_ATTR = "identity"  # the content key the result was made under
OWNER_ATTR = "owner"  # {"host", "pid", "started"}: the process running the trial
ORIGIN_ATTR = "results_folder"  # "<host>:<folder>": the results folder of the worker that trained the trial
STORE_ATTR = "model_store"  # the identity of the model store the study's first worker used
Identity = Callable[[TrialSpec], str]
Stored = Callable[[TrialSpec], "dict | None"]
Adopt = Callable[[TrialSpec, dict, str], None]


PER_EXAMPLE = ("dev_predictions", "dev_labels")


def pack_result(result: dict) -> dict:
    """Per-example class ids 0..9 as one digit string (≈1 byte per dev example in the study)."""
    packed = dict(result)
    for name in PER_EXAMPLE:
        values = packed.get(name)
        if values is not None and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 9 for v in values):
            packed[name] = {"digits": "".join(map(str, values))}
    return packed


def unpack_result(result: dict) -> dict:
    unpacked = dict(result)
    for name in PER_EXAMPLE:
        values = unpacked.get(name)
        if isinstance(values, dict) and "digits" in values:
            unpacked[name] = [int(c) for c in values["digits"]]
    return unpacked


def completed_trials(study: optuna.Study) -> dict[str, optuna.trial.FrozenTrial]:
    """Key -> first COMPLETE trial holding a result (whatever its identity)."""
    done = {}
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        key = t.user_attrs.get(KEY_ATTR)
        if key is not None and RESULT_ATTR in t.user_attrs and key not in done:
            done[key] = t
    return done


def spec_identity(spec: TrialSpec) -> str:
    """Default identity: a hash of the trial spec (its label aside), for ``run_trial``s that know no
    more about what determines a result."""
    material = {k: v for k, v in spec.as_dict().items() if k != "label"}
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()


class Ledger:
    """Which trials of this run are finished, judged by identity: the results folder first
    (``stored``), the study second (a COMPLETE trial recorded under the same identity)."""

    def __init__(
        self,
        specs: Mapping[str, TrialSpec],
        identity: Identity,
        stored: Stored | None,
        origin: str | None = None,
        adopt: Adopt | None = None,
    ):
        self.specs, self.identity_of, self.stored = specs, identity, stored
        self.origin, self.adopt = origin, adopt  # this worker's results folder; how to copy a result into it

    def identity(self, key: str) -> str:
        return self.identity_of(self.specs[key])

    def result(self, study: optuna.Study, key: str) -> dict | None:
        return self.results(study, [key]).get(key)

    def results(self, study: optuna.Study, keys: Sequence[str]) -> dict[str, dict]:
        done: dict[str, dict] = {}
        if self.stored is not None:  # the folder decides: no valid file = not finished ...
            for key in keys:
                result = self.stored(self.specs[key])
                if result is not None:
                    done[key] = dict(result)
            if self.origin is None or len(done) == len(keys):
                return done
        # ... except for a trial trained by a worker with another results folder (another checkout or
        # machine): its result is taken from the study and copied into this folder
        wanted = {key: self.identity(key) for key in keys if key not in done}
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            key = t.user_attrs.get(KEY_ATTR)
            if (
                key in wanted
                and key not in done
                and RESULT_ATTR in t.user_attrs
                and t.user_attrs.get(IDENTITY_ATTR) == wanted[key]
            ):
                made_in = t.user_attrs.get(ORIGIN_ATTR)
                if self.stored is not None and made_in in (None, self.origin):
                    continue  # made here and its file is gone (deleted): recomputed
                done[key] = unpack_result(t.user_attrs[RESULT_ATTR])
                if self.stored is not None and self.adopt is not None:
                    self.adopt(self.specs[key], done[key], made_in)
        return done

    def report_stale(self, study: optuna.Study, name: str) -> None:
        """One warning line for the study's finished trials of this run that are not reused: made
        under another identity, or (with a results folder) without their file."""
        done = self.results(study, list(self.specs))
        recorded: dict[str, set] = {}
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            key = t.user_attrs.get(KEY_ATTR)
            if key in self.specs and key not in done and RESULT_ATTR in t.user_attrs:
                recorded.setdefault(key, set()).add(t.user_attrs.get(IDENTITY_ATTR))
        no_file = sorted(k for k, identities in recorded.items() if self.identity(k) in identities)
        other = sorted(k for k in recorded if k not in no_file)
        if other:
            log.warning(
                "%d finished trial(s) of study %s were made under another identity (other data sizes, GLUE "
                "files, settings or schema version), e.g. %s: not reused, recomputed",
                len(other),
                name,
                other[0],
            )
        if no_file:
            log.warning(
                "%d finished trial(s) of study %s have no valid file in the results folder (deleted?), e.g. %s: "
                "recomputed",
                len(no_file),
                name,
                no_file[0],
            )
