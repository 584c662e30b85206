#!/usr/bin/env bash
# The CPU protocol as run on the project's 2-core machine (issue 11): MiniLM-L6 teacher, 2-layer
# students, seeds 1 2 3, lr 1e-4, on MRPC (all training examples) and SST-2 (the first 10,000).
# Each command is one `kedro run` on the same Optuna study; trial results land in results/cpu_protocol/
# (one JSON per trial) and the tables in results/cpu_protocol/tables/. Rerunning skips finished trials.
# WORKERS=2 starts two `kedro run`s per method group on the same study (disjoint trials; on 2 cores
# give each OMP_NUM_THREADS=1). RUN_GROUPS="..." (';'-separated) overrides the method groups,
# TASKS="mrpc" (space-separated) the tasks, LOGS=<prefix> the workers' log names (two run.sh at once;
# each group's output is appended, so a failed group's traceback stays).
set -u
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python}
WORKERS=${WORKERS:-1}
TASKS=${TASKS:-mrpc sst2}
LOGS=${LOGS:-run_worker}
COMMON="reproduce.table=cpu_protocol,reproduce.tasks=$TASKS,reproduce.seeds=1 2 3,glue_dir=../shared/glue,tracking.log_models=false,runtime.progress_bar=false"
IFS=';' read -r -a METHOD_GROUPS <<< "${RUN_GROUPS:-nkd rkd pkd_1 pkd_3 pkd_6 alp;pkd_1_l2 pkd_6_l2 alp_l2;kd lwd ted;single_teacher two_teachers;ckd tinybert}"
for methods in "${METHOD_GROUPS[@]}"; do
  echo "=== $(date -u +%FT%TZ) methods: $methods (workers: $WORKERS)"
  for worker in $(seq "$WORKERS"); do
    echo "=== $(date -u +%FT%TZ) methods: $methods" >> "$LOGS$worker.log"
    $PY -m kedro run --pipeline=reproduce --params "$COMMON,reproduce.methods=$methods" >> "$LOGS$worker.log" 2>&1 \
      || echo "=== failed: $methods (worker $worker, see $LOGS$worker.log)" &
    sleep 20   # let the first worker create the study before the next one opens it
  done
  wait
done
echo "=== $(date -u +%FT%TZ) done"
