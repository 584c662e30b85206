#!/usr/bin/env bash
# The acceptance commands of the pipelines on the real GLUE files in ../shared/glue, timed one after another.
# Usage: bash benchmarks/real_glue_runs.sh [GLUE_DIR]   (run from the project root; ~1 h on 2 CPU cores)
set -uo pipefail
cd "$(dirname "$0")/.."
GLUE=${1:-../shared/glue}
export HF_HUB_OFFLINE=1 KEDRO_DISABLE_TELEMETRY=1
KEDRO=${KEDRO:-.venv/bin/kedro}
run() {
  local start=$(date +%s)
  "$KEDRO" run "$@" > "data/08_reporting/log_$(echo "$*" | tr -c 'a-zA-Z0-9=' '_' | cut -c1-80).txt" 2>&1
  local rc=$?
  echo "$(( $(date +%s) - start )) s  exit $rc  kedro run $*"
}
run --pipelines=distill_alp --params "glue_dir=$GLUE"
run --pipelines=train_teacher --params "task=rte,glue_dir=$GLUE"
run --pipelines=distill_alp --params "task=rte,glue_dir=$GLUE"
run --pipelines=distill_baselines --params "task=rte,glue_dir=$GLUE"
run --pipelines=distill_ted --params "task=mrpc,glue_dir=$GLUE"
run --pipelines=distill_ted_baselines --params "task=mrpc,glue_dir=$GLUE"
run --pipelines=distill_multi_teacher --params "task=sst2,glue_dir=$GLUE,max_train_samples=2000"
run --pipelines=distill_multi_teacher_baselines --params "task=sst2,glue_dir=$GLUE,max_train_samples=2000"
