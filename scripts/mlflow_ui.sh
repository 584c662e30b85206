#!/usr/bin/env bash
# Print the links to the bert_kd runs (the comparison view: score, method and task first; the charts, the dev
# score first; the plain runs table) and start the MLflow UI on the project's store, lean: one web worker on up
# to 4 cores (two above), no job runner (MLflow's defaults: 15 processes, about 3.7 GB on a 2-core machine).
#   scripts/mlflow_ui.sh [--port 5000] [--backend-store-uri sqlite:///mlflow.db] [--workers N] [--print-only]
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-.venv/bin/python}" -m bert_kd.tracking ui "$@"
