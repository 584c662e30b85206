"""What a ``kedro run``'s own parameters become before the pipeline runs: every URL's password masked before
kedro-mlflow tags the parent run with them ([`CredentialsHook`][]), and ``glue_dir`` chosen by precedence
([`apply_glue_dir_precedence`][])."""

from __future__ import annotations

import contextlib
import logging

from kedro.framework.hooks import hook_impl

log = logging.getLogger(__name__)


class CredentialsHook:
    """The ``kedro run``'s own parameters (``--params`` among them) with every URL's password masked
    ([`scrub`][config.credentials.scrub]) before any other hook sees them: kedro-mlflow tags the parent run
    with them (``runtime_params``), where the MLflow UI shows them to everyone. The run's parameters are not
    touched: the configuration loader has already taken a PostgreSQL URL's password into ``PGPASSWORD``."""

    @hook_impl(hookwrapper=True)
    def before_pipeline_run(self, run_params, pipeline, catalog):
        from bert_kd.config.credentials import scrub

        if isinstance(run_params, dict):
            run_params.update(scrub(dict(run_params)))
        yield


def apply_glue_dir_precedence(run_params, catalog) -> str | None:
    """``glue_dir`` by precedence ``--params`` > ``GLUE_DIR`` > conf, written back into the
    catalog (``params:glue_dir`` and ``parameters``) and logged once; the folder in use."""
    import os

    from bert_kd.core.data.glue import DEFAULT_GLUE_DIR

    explicit = dict((run_params or {}).get("runtime_params") or {})
    parameters = catalog.load("parameters")
    configured = parameters.get("glue_dir")
    env = os.environ.get("GLUE_DIR", "").strip()
    if "glue_dir" in explicit:
        chosen, source = explicit["glue_dir"], "--params"
        ignored = f"; GLUE_DIR={env} is not used" if env and str(env) != str(chosen) else ""
    elif env:
        chosen, source = env, "the GLUE_DIR environment variable"
        ignored = f"; conf's glue_dir {configured} is not used" if configured and configured != env else ""
    else:
        chosen, source, ignored = configured, "conf", ""
    if chosen != configured:
        catalog.save("parameters", {**parameters, "glue_dir": chosen})
        with contextlib.suppress(Exception):  # a pipeline that does not read glue_dir has no entry
            catalog.save("params:glue_dir", chosen)
    log.info("glue_dir = %s (from %s%s)", chosen or DEFAULT_GLUE_DIR, source, ignored)
    return chosen
