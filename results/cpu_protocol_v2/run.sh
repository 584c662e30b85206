#!/usr/bin/env bash
# CPU protocol v2 (issue 19) as it is meant to run on the project's 2-core machine: MiniLM-L6 teacher,
# 2-layer students from the pre-trained checkpoint (TED rows: teacher layers M(k)), seeds 1–8, SST-2 also 9–10 (power.py),
# lr 1e-4, 5 epochs, on MRPC (all training examples) and SST-2 (the first 10,000).
# Each command is one `kedro run` on the same Optuna study; trial results land in results/cpu_protocol_v2/
# (one JSON per trial) and the tables in results/cpu_protocol_v2/tables/. Rerunning skips finished trials
# (the JSONs are read first; a killed trial resumes from its job-store checkpoint), so the script is resumable.
# WORKERS=2 starts two `kedro run`s per method group on the same study (disjoint trials; on 2 cores give
# each OMP_NUM_THREADS=1). RUN_GROUPS="..." (';'-separated) overrides the method groups, TASKS="sst2"
# (space-separated) the tasks, SEEDS="1 2 3 4 5" the seeds, LOGS=<prefix> the workers' log names (each
# group's output is appended, so a failed group's traceback stays).
# Batches in random order, as v1: the table's own `group_by_length` (default false) decides, not the runtime default.
# Order: seeds in rounds (1–5 for every row first, then 6–8, then 9–10: the table's extra SST-2 seeds, so that round
# has SST-2 trials only), so a cut-off run still gives a balanced table.
set -u
cd "$(dirname "$0")/../.."
# The committed trials' teachers were trained on AVX2-only CPUs (the project machine through session 13). On a
# CPU with AVX-512 the same fp32 training gives other teachers — session 14: SST-2 86.81 vs 86.47, MRPC (acc+F1)/2
# 84.25 vs 82.23, the second even with PyTorch, MKL and oneDNN pinned to AVX2 — and every trial would stop at
# TeacherMismatch after the teachers' ~20 minutes. ALLOW_ANY_CPU=1 skips this check (e.g. for a new table).
if grep -qw avx512f /proc/cpuinfo 2>/dev/null && [ "${ALLOW_ANY_CPU:-0}" != 1 ]; then
  echo "run.sh: this CPU has AVX-512; cpu_protocol_v2's teachers were trained on AVX2-only CPUs and cannot be" \
       "retrained here (results/cpu_protocol_v2/README.md, 'Same key, other hardware'). Nothing run." >&2
  exit 1
fi
PY=${PYTHON:-python}
WORKERS=${WORKERS:-1}
TASKS=${TASKS:-mrpc sst2}
LOGS=${LOGS:-run_v2_worker}
IFS=';' read -r -a SEED_ROUNDS <<< "${SEEDS:-1 2 3 4 5;6 7 8;9 10}"
IFS=';' read -r -a METHOD_GROUPS <<< "${RUN_GROUPS:-nkd rkd pkd ckd alp;kd lwd ted;single_teacher two_teachers}"
for seeds in "${SEED_ROUNDS[@]}"; do
  COMMON="reproduce.table=cpu_protocol_v2,reproduce.tasks=$TASKS,reproduce.seeds=$seeds,glue_dir=../shared/glue,tracking.log_models=false,runtime.progress_bar=false"
  for methods in "${METHOD_GROUPS[@]}"; do
    echo "=== $(date -u +%FT%TZ) seeds: $seeds methods: $methods (workers: $WORKERS)"
    for worker in $(seq "$WORKERS"); do
      echo "=== $(date -u +%FT%TZ) seeds: $seeds methods: $methods" >> "$LOGS$worker.log"
      $PY -m kedro run --pipeline=reproduce --params "$COMMON,reproduce.methods=$methods" >> "$LOGS$worker.log" 2>&1 \
        || echo "=== failed: $methods seeds $seeds (worker $worker, see $LOGS$worker.log)" &
      sleep 20   # let the first worker create the study before the next one opens it
    done
    wait
  done
done
# The full table from the results folder alone (every trial's JSON; nothing trains).
$PY -m kedro run --pipeline=reproduce --params "reproduce.table=cpu_protocol_v2,reproduce.results_only=true,glue_dir=../shared/glue" \
  >> "${LOGS}1.log" 2>&1 || echo "=== table from the results folder failed (see ${LOGS}1.log)"
echo "=== $(date -u +%FT%TZ) done"
