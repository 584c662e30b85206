#!/usr/bin/env bash
# Print the URL of the bert_kd runs table and start the MLflow UI on the project's store.
#   scripts/mlflow_ui.sh [--port 5000] [--backend-store-uri sqlite:///mlflow.db] [--print-only]
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-.venv/bin/python}" -m bert_kd.tracking ui "$@"
