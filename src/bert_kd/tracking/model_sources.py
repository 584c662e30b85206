"""The MLflow side of [`bert_kd.experiment.tracker.ModelSources`][]: a model named by an MLflow
URI (``models:/…``, ``runs:/…``, ``mlflow-artifacts:/…``) downloaded and confined to a local
directory, and the task its registry entry is tagged with."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from bert_kd.config.credentials import mask
from bert_kd.config.errors import DamagedModelError, ModelNotFoundError
from bert_kd.experiment.tracker import DOWNLOAD_PREFIX, discard_download
from bert_kd.tracking.logged_models import UnsafeModelPathError, bundle_directory, unfinished_model

log = logging.getLogger(__name__)


class MlflowModelSources:
    """[`bert_kd.experiment.tracker.ModelSources`][] on the active MLflow tracking store."""

    def local_directory(self, uri: str, key: str) -> Path:
        import mlflow

        unfinished = unfinished_model(uri)
        if unfinished:
            raise DamagedModelError(
                f"{uri} cannot be used: {unfinished}",
                key,
                "run the pipeline that trained it again: its store entry is reused and logged "
                "again, in the new run (use that run's URI), or evaluate the store entry's folder",
            )
        folder = tempfile.mkdtemp(prefix=DOWNLOAD_PREFIX)  # removed when the model is refused
        try:
            local = bundle_directory(mlflow.artifacts.download_artifacts(artifact_uri=uri, dst_path=folder))
        except UnsafeModelPathError as exc:
            discard_download(Path(folder))
            raise DamagedModelError(
                f"{uri} is not used: {exc}",
                key,
                "evaluate a model logged by bert-kd as it was logged (its MLmodel names data/<key> "
                "inside the model); log it again from its store entry if its MLmodel was edited",
            ) from None
        except Exception as exc:  # noqa: BLE001 - MlflowException, OSError …: the URI names nothing downloadable
            discard_download(Path(folder))
            first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            raise ModelNotFoundError(
                f"{uri!r} cannot be downloaded from MLflow ({first_line})",
                key,
                f"check the URI in the MLflow UI (tracking URI {mask(mlflow.get_tracking_uri())}): a registered model "
                "(<name>@champion, <name>/<version>), a LoggedModel's id (m-…) or its run and name "
                "(runs:/<run id>/alp-sst2-student); the run must have logged it (tracking.log_models: true)",
            ) from None
        log.info("%s %s downloaded to %s", key, uri, local)
        return local

    def recorded_task(self, uri: str) -> tuple[str | None, str]:
        """A registered version's (or its registered model's) ``bert_kd.task``, a LoggedModel's ``task``."""
        if not uri.startswith("models:/"):
            return None, ""
        from mlflow import MlflowClient
        from mlflow.exceptions import MlflowException

        client, name = MlflowClient(), uri[len("models:/") :].strip("/")
        try:
            if "@" in name:
                model, alias = name.split("@", 1)
                version = client.get_model_version_by_alias(model, alias)
            elif "/" in name:
                model, number = name.split("/", 1)
                version = client.get_model_version(model, number)
            else:
                logged = client.get_logged_model(name)
                return (
                    (logged.tags.get("task"), "the LoggedModel's tag task") if logged.tags.get("task") else (None, "")
                )
            if version.tags.get("bert_kd.task"):
                return version.tags["bert_kd.task"], "the registered version's tag bert_kd.task"
            registered = client.get_registered_model(model).tags.get("bert_kd.task")
            return (registered, "the registered model's tag bert_kd.task") if registered else (None, "")
        except MlflowException:  # the download named the URI already; nothing more to read here
            return None, ""
