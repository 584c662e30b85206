#!/usr/bin/env bash
# Run (or continue) a sweep table: bash scripts/sweep.sh <table>   e.g. cpu_protocol_v2
# Each command is one `kedro run --pipelines=reproduce` on the table's Optuna study; every finished trial lands in
# results/<table>/ as one JSON and is skipped on the next run (a killed trial resumes from its job-store checkpoint),
# so the script is resumable. At the end the table is rebuilt from the results folder alone (nothing trains).
#   WORKERS=2      two `kedro run`s per method group on the same study (disjoint trials; on 2 cores give each OMP_NUM_THREADS=1)
#   SEEDS="1 2 3 4 5;6 7 8"   seed rounds (';'-separated), run one after another so a cut-off run stays balanced;
#                  unset: the table's own seeds in one round
#   RUN_GROUPS="nkd rkd;kd lwd ted"   method groups (';'-separated); unset: every row of the table in one group
#   TASKS="mrpc sst2"   the tasks (unset: the table's); GLUE_DIR (default ../shared/glue); PYTHON; LOGS (log prefix)
# A worker that fails stops the sweep once its round's other workers are done: the reason (the worker's bert-kd
# block, or its log's last lines) is printed here and the script exits with the worker's status (2: a user error).
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

reason() {  # reason LOG: the end of LOG from its last bert-kd block (a user error), else its last 15 lines
  awk '/^bert-kd: /{n=NR} {line[NR]=$0} END{s=(n ? n : (NR > 15 ? NR - 14 : 1)); for (i=s; i<=NR; i++) print line[i]}' "$1"
}

fail() {  # fail CODE WHAT LOG: the reason on the terminal, then exit with the worker's status (2: a user error)
  echo "=== $(date -u +%FT%TZ) failed: $2 (exit $1; $3):" >&2
  reason "$3" | sed 's/^/    /' >&2
  exit "$1"
}

for seeds in "${SEED_ROUNDS[@]}"; do
  for methods in "${METHOD_GROUPS[@]}"; do
    params=$COMMON
    [ -n "$seeds" ] && params="$params,reproduce.seeds=$seeds"
    [ -n "$methods" ] && params="$params,reproduce.methods=$methods"
    echo "=== $(date -u +%FT%TZ) $table seeds: ${seeds:-all} methods: ${methods:-all} (workers: $WORKERS)"
    pids=()
    for worker in $(seq "$WORKERS"); do
      echo "=== $(date -u +%FT%TZ) seeds: ${seeds:-all} methods: ${methods:-all}" >> "$LOGS$worker.log"
      $PY -m kedro run --pipelines=reproduce --params "$params" >> "$LOGS$worker.log" 2>&1 &
      pids+=($!)
      [ "$worker" -lt "$WORKERS" ] && sleep 20   # let the first worker create the study before the next one opens it
    done
    failed=()  # every worker of the round finishes (each one's trials are saved) before the sweep stops
    for worker in $(seq "$WORKERS"); do
      code=0
      wait "${pids[$((worker - 1))]}" || code=$?
      [ "$code" -eq 0 ] || failed+=("$worker:$code")
    done
    for entry in "${failed[@]}"; do
      echo "=== failed: ${methods:-all} seeds ${seeds:-all} (worker ${entry%%:*}, exit ${entry#*:}, see $LOGS${entry%%:*}.log)" >&2
    done
    if [ ${#failed[@]} -gt 0 ]; then
      first=${failed[0]}
      fail "${first#*:}" "worker ${first%%:*} of $table, seeds ${seeds:-all}, methods ${methods:-all}" "$LOGS${first%%:*}.log"
    fi
  done
done
# The full table from the results folder alone (every trial's JSON; nothing trains).
code=0
$PY -m kedro run --pipelines=reproduce --params "reproduce.table=$table,reproduce.results_only=true,glue_dir=${GLUE_DIR:-../shared/glue}" \
  >> "${LOGS}1.log" 2>&1 || code=$?
[ "$code" -eq 0 ] || fail "$code" "the table of $table from the results folder" "${LOGS}1.log"
echo "=== $(date -u +%FT%TZ) done"
