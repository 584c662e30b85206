#!/usr/bin/env bash
# One candidate of the README's main job (`kedro run --pipelines=distill_alp`), timed, with the machine's
# load before and after (benchmarks/results/main_job.md records what each candidate gave).
#   THREADS=2 bash scripts/main_job.sh <name> "max_train_samples=8000,teacher.training.epochs=2"
# Record: benchmarks/results/main_job_<name>.json (scripts/run_record.py). Log: data/08_reporting/main_job/<name>.log (accuracies per epoch, /usr/bin/time's wall, CPU and peak RSS),
# every line time-stamped (scripts/main_job_logging.yml); the seconds of each stage (ingest, tokenise, each
# teacher and student epoch, teacher cache, evaluations, saving and MLflow logging, figures) are printed at the
# end by benchmarks/stage_times.py. TRACKING=true keeps MLflow on, as a user has it (the default here: off).
# Teachers and teacher caches come from the content-keyed store, so student variants reuse the same teacher.
set -euo pipefail
name=${1:?candidate name}
extra=${2:-}
threads=${THREADS:-2}
python=${PYTHON:-.venv/bin/python}
params="glue_dir=${GLUE_DIR_PARAM:-../shared/glue},tracking.enabled=${TRACKING:-false},runtime.progress_bar=false${extra:+,$extra}"
log=data/08_reporting/main_job/$name.log
mkdir -p "$(dirname "$log")"
{
  echo "candidate: $name"; echo "threads: $threads"; echo "params: $params"; echo "nice: $(nice)"
  echo "load before: $(uptime)"
  echo "start: $(date +%s.%N)"
} >"$log"
COLUMNS=240 OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 \
  KEDRO_DISABLE_TELEMETRY=1 PYTHONPATH=$PWD/src KEDRO_LOGGING_CONFIG=$PWD/scripts/main_job_logging.yml \
  /usr/bin/time -v "$python" -m kedro run --pipelines=distill_alp --params "$params" >>"$log" 2>&1
echo "end: $(date +%s.%N)" >>"$log"
echo "load after: $(uptime)" >>"$log"
grep -E "epoch [0-9]+:|Elapsed \(wall|User time|System time|Maximum resident" "$log"
"$python" benchmarks/stage_times.py "$log"
# the machine-made record (stages, accuracies, wall/CPU/memory, machine, commit, load, threads)
"$python" scripts/run_record.py main-job "$log" "benchmarks/results/main_job_$name.json"
