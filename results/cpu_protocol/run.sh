#!/usr/bin/env bash
# The CPU protocol as run on the project's 2-core machine (issue 11): MRPC, all training examples,
# MiniLM-L6 teacher, 2-layer students, seeds 1 2 3, the protocol grid restricted to lr 1e-4.
# Each command is one `kedro run` on the same Optuna study; trial results land in results/cpu_protocol/
# (one JSON per trial) and the tables in results/cpu_protocol/tables/. Rerunning skips finished trials.
set -u
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python}
COMMON="reproduce.table=cpu_protocol,reproduce.tasks=mrpc,reproduce.seeds=1 2 3,reproduce.grid=training.learning_rate=1e-4,glue_dir=../shared/glue,tracking.log_models=false,runtime.progress_bar=false"
for methods in "nkd rkd pkd_1 pkd_3 pkd_6 alp" "ckd tinybert" "kd lwd ted"; do
  echo "=== $(date -u +%FT%TZ) methods: $methods"
  $PY -m kedro run --pipeline=reproduce --params "$COMMON,reproduce.methods=$methods" || echo "=== failed: $methods"
done
echo "=== $(date -u +%FT%TZ) done"
