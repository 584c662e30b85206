#!/usr/bin/env bash
# Run (or continue) a sweep table: bash scripts/sweep.sh <table>   e.g. cpu_protocol_v2
# Each command is one `kedro run --pipeline=reproduce` on the table's Optuna study; every finished trial lands in
# results/<table>/ as one JSON and is skipped on the next run (a killed trial resumes from its job-store checkpoint),
# so the script is resumable. At the end the table is rebuilt from the results folder alone (nothing trains).
#   WORKERS=2      two `kedro run`s per method group on the same study (disjoint trials; on 2 cores give each OMP_NUM_THREADS=1)
#   SEEDS="1 2 3 4 5;6 7 8"   seed rounds (';'-separated), run one after another so a cut-off run stays balanced;
#                  unset: the table's own seeds in one round
#   RUN_GROUPS="nkd rkd;kd lwd ted"   method groups (';'-separated); unset: every row of the table in one group
#   TASKS="mrpc sst2"   the tasks (unset: the table's); GLUE_DIR (default ../shared/glue); PYTHON; LOGS (log prefix)
set -u
table=${1:?usage: bash scripts/sweep.sh <table>   (a table of reproduce.tables in conf/base)}
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
WORKERS=${WORKERS:-1}
LOGS=${LOGS:-sweep_${table}_worker}
COMMON="reproduce.table=$table,glue_dir=${GLUE_DIR:-../shared/glue},tracking.log_models=false,runtime.progress_bar=false"
[ -n "${TASKS:-}" ] && COMMON="$COMMON,reproduce.tasks=$TASKS"
IFS=';' read -r -a SEED_ROUNDS <<< "${SEEDS:-}"
[ ${#SEED_ROUNDS[@]} -eq 0 ] && SEED_ROUNDS=("")
IFS=';' read -r -a METHOD_GROUPS <<< "${RUN_GROUPS:-}"
[ ${#METHOD_GROUPS[@]} -eq 0 ] && METHOD_GROUPS=("")
for seeds in "${SEED_ROUNDS[@]}"; do
  for methods in "${METHOD_GROUPS[@]}"; do
    params=$COMMON
    [ -n "$seeds" ] && params="$params,reproduce.seeds=$seeds"
    [ -n "$methods" ] && params="$params,reproduce.methods=$methods"
    echo "=== $(date -u +%FT%TZ) $table seeds: ${seeds:-all} methods: ${methods:-all} (workers: $WORKERS)"
    for worker in $(seq "$WORKERS"); do
      echo "=== $(date -u +%FT%TZ) seeds: ${seeds:-all} methods: ${methods:-all}" >> "$LOGS$worker.log"
      $PY -m kedro run --pipeline=reproduce --params "$params" >> "$LOGS$worker.log" 2>&1 \
        || echo "=== failed: ${methods:-all} seeds ${seeds:-all} (worker $worker, see $LOGS$worker.log)" &
      sleep 20   # let the first worker create the study before the next one opens it
    done
    wait
  done
done
# The full table from the results folder alone (every trial's JSON; nothing trains).
$PY -m kedro run --pipeline=reproduce --params "reproduce.table=$table,reproduce.results_only=true,glue_dir=${GLUE_DIR:-../shared/glue}" \
  >> "${LOGS}1.log" 2>&1 || echo "=== table from the results folder failed (see ${LOGS}1.log)"
echo "=== $(date -u +%FT%TZ) done"
