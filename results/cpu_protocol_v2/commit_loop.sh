#!/usr/bin/env bash
# Every 20 minutes (EVERY=<seconds>), commit the worker checkout's finished v2 trials with commit_trials.sh while this
# checkout has no uncommitted edits — but never the batch that completes the table: that one is committed by hand
# together with the rewritten "What v2 can say" and the v2 README's status (tests/sweep/test_committed_results.py
# fails on a complete table whose prose still says "interim").
#   setsid nohup bash results/cpu_protocol_v2/commit_loop.sh ../v2run > ../commit_loop.log 2>&1 &
# --seeded: the seeded rerun's worktree (rerun_seeded.sh), committed by `commit_trials.sh --seeded`.
#   setsid nohup bash results/cpu_protocol_v2/commit_loop.sh --seeded ../seeded > ../seeded_loop.log 2>&1 &
set -u
cd "$(dirname "$0")/../.."
mode=()
[ "${1:-}" = "--seeded" ] && { mode=(--seeded); shift; }
worker=${1:?usage: commit_loop.sh [--seeded] WORKER_CHECKOUT}
PY=${PYTHON:-.venv/bin/python}
total=$(PYTHONPATH=src "$PY" -c "import sys; sys.path.insert(0, 'results/cpu_protocol_v2'); import paper_gap; print(paper_gap.table_total())" 2>/dev/null | tail -n 1)
[[ "$total" =~ ^[0-9]+$ ]] || { echo "commit_loop.sh: could not read the table's trial total" >&2; exit 1; }
while true; do
  sleep "${EVERY:-1200}"
  finished=$(find "$worker/results/cpu_protocol_v2" -maxdepth 1 -name '*.json' | wc -l)
  if [ "$finished" -ge "$total" ]; then
    echo "$(date -u +%FT%TZ) all $total trials finished: commit the last batch by hand, with the prose"
  elif git diff --quiet && git diff --cached --quiet; then
    echo "$(date -u +%FT%TZ) $(bash results/cpu_protocol_v2/commit_trials.sh "${mode[@]}" "$worker" 2>&1 | tail -n 1)"
  else
    echo "$(date -u +%FT%TZ) skipped: this checkout has uncommitted edits"
  fi
done
