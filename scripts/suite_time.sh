#!/usr/bin/env bash
# The suite's times as a machine-made record: the README's test command and the slow tier, one after the other,
# on this tree, each with the load before and after (a shared machine's walls are longer: the record says so).
#   bash scripts/suite_time.sh                 # both tiers -> benchmarks/results/suite_time.json
#   TIERS=readme bash scripts/suite_time.sh    # the README's command only (the record's slow tier stays null)
# Logs: data/08_reporting/suite_time/<tier>.log; the record is written by scripts/run_record.py.
set -euo pipefail
python=${PYTHON:-.venv/bin/python}
out=${1:-benchmarks/results/suite_time.json}
tiers=${TIERS:-readme slow}
logs=data/08_reporting/suite_time
mkdir -p "$logs" && rm -f "$logs"/*.log   # a tier not run now has no log: its record entry is null
source scripts/pytest_tier.sh   # tier NAME PYTEST-ARGS... (as .ci/run logs them)
export PYTHON=$python
for tier in $tiers; do
  case $tier in
    readme) tier readme -q >/dev/null || echo "exit: $?" >>"$logs/readme.log" ;;
    slow) tier slow -q -m slow >/dev/null || echo "exit: $?" >>"$logs/slow.log" ;;
    *) echo "suite_time: unknown tier $tier (readme, slow)" >&2; exit 2 ;;
  esac
done
"$python" scripts/run_record.py suite "$logs/readme.log" "$logs/slow.log" "$out"
