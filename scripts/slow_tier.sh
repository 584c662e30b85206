#!/usr/bin/env bash
# The slow tier (`pytest -m slow`: several processes, services, CPU compiles; ≈ 14 min on 2 cores) run on this
# commit and recorded: benchmarks/results/slow_tier.json holds the commit and every test's outcome. CI (.ci/run)
# reruns the tier only where that record does not cover its tree (a test not passed, or any file but committed
# results changed since), so run this on a committed tree before a submission and commit the record.
#   bash scripts/slow_tier.sh [record]        # default benchmarks/results/slow_tier.json
set -uo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
out=${1:-benchmarks/results/slow_tier.json}
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "slow_tier: the tree has uncommitted changes; the record names a commit: commit them first" >&2
  exit 2
fi
logs=data/08_reporting/slow_tier
mkdir -p "$logs" && rm -f "$logs"/*
source scripts/pytest_tier.sh   # tier NAME PYTEST-ARGS... (as .ci/run logs them)
export PYTHON=$python
TIER_LOGS=$logs tier slow -q -m slow --durations=25 --junitxml="$logs/slow.xml"
rc=$?
"$python" benchmarks/run_record.py slow-tier "$logs/slow.log" "$logs/slow.xml" "$out" || rc=2
exit "$rc"
