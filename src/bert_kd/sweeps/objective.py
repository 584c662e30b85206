"""The objective a sweep's study optimizes: one trial, from its grid point to its result in the study.

A trial reuses a result the study or the results folder already has under the identity asked for now, else
claims its grid point ([`TrialClaims`][bert_kd.sweeps.claims.TrialClaims]) and runs ``run_trial``, whose result
is checked ([`check_result`][]) and stored with the trial.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Callable, Mapping, Sequence

import optuna
from optuna.trial import TrialState

from bert_kd.config.errors import TrackingUnreachableError
from bert_kd.sweeps.claims import TrialClaims
from bert_kd.sweeps.dead_owners import owner_of_this_process
from bert_kd.sweeps.spec import TrialSpec
from bert_kd.sweeps.study_records import (
    GRID_PARAM,
    IDENTITY_ATTR,
    KEY_ATTR,
    ORIGIN_ATTR,
    OWNER_ATTR,
    RESULT_ATTR,
    Ledger,
    pack_result,
)

log = logging.getLogger(__name__)

RunTrial = Callable[[TrialSpec], Mapping[str, Any]]

#: Errors that stop the worker at the trial that raised them: a service gone (the MLflow server), not the trial.
STOPS_THE_WORKER = (TrackingUnreachableError,)


class SweepTrialError(ValueError):
    """``run_trial`` returned something the sweep cannot report."""


def check_result(result: Mapping[str, Any], spec: TrialSpec) -> dict:
    """Validate a ``run_trial`` result (the contract the job path implements).

    Required: ``dev_metric`` (float, the task's primary metric). Optional: ``dev_metrics``
    (dict), ``heldout_metric`` (float; required for ``selection: heldout``),
    ``dev_predictions`` + ``dev_labels`` (equal-length lists, for the paired bootstrap),
    ``teacher_dev_metric`` (float), ``run_id`` / ``model_key`` (str).
    """
    if not isinstance(result, Mapping):
        raise SweepTrialError(f"run_trial({spec.key}) returned {type(result).__name__}, expected a dict")
    result = dict(result)
    for name in ("dev_metric", "heldout_metric", "teacher_dev_metric"):
        value = result.get(name)
        if value is None:
            if name == "dev_metric":
                raise SweepTrialError(f"run_trial({spec.key}) returned no dev_metric")
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SweepTrialError(f"run_trial({spec.key}): {name} must be a number, got {value!r}")
        result[name] = float(value)
    predictions, labels = result.get("dev_predictions"), result.get("dev_labels")
    if (predictions is None) != (labels is None):
        raise SweepTrialError(f"run_trial({spec.key}): give both dev_predictions and dev_labels or neither")
    if predictions is not None:
        result["dev_predictions"], result["dev_labels"] = _plain_list(predictions), _plain_list(labels)
        if len(result["dev_predictions"]) != len(result["dev_labels"]):
            raise SweepTrialError(
                f"run_trial({spec.key}): {len(result['dev_predictions'])} dev_predictions but "
                f"{len(result['dev_labels'])} dev_labels"
            )
    return result


def _plain_list(values) -> list:
    """numpy arrays / tensors -> JSON-able Python ints and floats."""
    values = values.tolist() if hasattr(values, "tolist") else list(values)
    return [v.item() if hasattr(v, "item") else v for v in values]


def _value(result: Mapping, key: str, selection: str) -> float:
    value = result["dev_metric"] if selection == "dev" else result.get("heldout_metric")
    if value is None:
        raise SweepTrialError(f"run_trial({key}) returned no heldout_metric but the table selects on heldout")
    return value if math.isfinite(value) else float("-inf")


def _reuse(trial: optuna.Trial, result: Mapping, key: str, selection: str) -> float:
    trial.set_user_attr(RESULT_ATTR, pack_result(dict(result)))
    trial.set_user_attr("reused", True)
    return _value(result, key, selection)


def make_objective(
    specs: Mapping[str, TrialSpec],
    universe: Sequence[str],
    run_trial: RunTrial,
    selection: str,
    claims: TrialClaims,
    ledger: Ledger,
    failures: dict[str, str],
    stopped: list[Exception],
):
    def objective(trial: optuna.Trial) -> float:
        key = trial.suggest_categorical(GRID_PARAM, list(universe))
        trial.set_user_attr(KEY_ATTR, key)
        if key not in specs:  # a queued point of another worker's restriction (e.g. a retry): not ours
            raise optuna.TrialPruned(f"{key} is outside this run's restriction; a run that includes it queues it again")
        trial.set_user_attr(OWNER_ATTR, owner_of_this_process())
        identity = ledger.identity(key)
        trial.set_user_attr(IDENTITY_ATTR, identity)
        study = trial.study
        done = ledger.result(study, key)
        if done is not None:  # another worker (or an earlier run) finished it: reuse, don't train
            return _reuse(trial, done, key, selection)
        holder = claims.claim(f"{key}#{identity}", trial._trial_id, lambda: ledger.result(study, key) is None)
        if holder is not None:  # another worker owns this grid point: leave it to it
            done = ledger.result(study, key)
            if done is not None:  # ... and has finished it since we looked
                return _reuse(trial, done, key, selection)
            log.info("trial %s is claimed by trial id %d in another worker; skipping it here", key, holder)
            raise optuna.TrialPruned(f"{key} is claimed by trial id {holder}")
        spec = specs[key]
        try:
            result = check_result(run_trial(spec), spec)
        except SystemExit:  # SIGTERM (RunStatusHook): the trial failed, another worker takes it at once
            fail_quietly(study, trial._trial_id)
            raise
        except Exception as error:
            failures[key] = f"{type(error).__name__}: {error}".splitlines()[0][:300]
            if isinstance(error, STOPS_THE_WORKER):  # every later trial would fail the same way
                stopped.append(error)
                trial.study.stop()
            raise
        trial.set_user_attr(IDENTITY_ATTR, ledger.identity(key))  # the same, unless the GLUE files were just fetched
        if ledger.origin is not None:
            trial.set_user_attr(ORIGIN_ATTR, ledger.origin)
        trial.set_user_attr(RESULT_ATTR, pack_result(result))
        return _value(result, key, selection)

    return objective


def fail_quietly(study: optuna.Study, trial_id: int) -> None:
    """Mark a running trial ``FAIL`` on the way out of a stopped worker; a database that does not answer then is
    left to the heartbeat (the trial goes stale and is retried)."""
    try:
        study._storage.set_trial_state_values(trial_id, TrialState.FAIL)
    except Exception as error:  # the worker is stopping; the heartbeat covers this
        log.warning("trial id %d could not be marked failed (%s): its heartbeat will go stale", trial_id, error)
