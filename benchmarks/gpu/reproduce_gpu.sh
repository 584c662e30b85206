# A real slice of ALP-KD Table 1 through `kedro run --env paper --pipelines=reproduce` on one GPU, timed end to end
# (docs/gpu.md, "The next GPU draw"):
#   bash benchmarks/gpu/reproduce_gpu.sh [--dry-run] [--site TARBALL] OUTDIR
# Every method of the table on RTE and MRPC, seed 1, every learning rate, at the grid points GRID keeps (default:
# η ∈ {0.2, 0.5}, λ = 0.2: 90 trials), WORKERS workers (default 4) on one Optuna study sharing the GPU, with
# runtime.compile=COMPILE (default reduce-overhead), the teacher a randomly initialised BERT-base (timing needs its
# shapes, not its weights; the machine reaches no model hub) with BERT's uncased WordPiece vocabulary from TOKENIZER
# (default .gpu_carry/bert_tokenizer), real GLUE files from GLUE_DIR (default .gpu_carry/glue: carried with the
# checkout). The workers stop after BUDGET_S seconds (default 420: with the set-up one call of about 8 minutes, inside 9.5);
# the record is made from the trials that finished: OUTDIR/reproduce_gpu_<chip>.json and .md
# (benchmarks/gpu/reproduce_gpu.py summarize), which the caller copies to benchmarks/results/.
# --site TARBALL: the project's pins as one site-packages tarball (benchmarks/gpu/gpu_run_helper.py bundle), as gpu_run.sh.
# --dry-run: the same on the CPU with a tiny teacher and tiny RTE (two trials, two workers, compile off).
set -euo pipefail
usage="usage: bash benchmarks/gpu/reproduce_gpu.sh [--dry-run] [--site TARBALL] OUTDIR"
dry_run=false
site_tarball=""
while [ $# -gt 1 ]; do
  case "$1" in
    --dry-run) dry_run=true; shift ;;
    --site) site_tarball=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
    *) break ;;
  esac
done
if [ $# -ne 1 ] || [ -z "$1" ] || [ "${1#-}" != "$1" ]; then echo "$usage" >&2; exit 2; fi
repo=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
PY=${PYTHON:-python}
cd "$repo"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 KEDRO_DISABLE_TELEMETRY=1 DO_NOT_TRACK=1
export PYTHONPATH="$repo/src${PYTHONPATH:+:$PYTHONPATH}" MLFLOW_TRACKING_URI="sqlite:///$out/mlflow.db"
export TORCHINDUCTOR_CACHE_DIR="$out/inductor_cache"  # shared: a worker compiling a graph another compiled loads it
if [ -n "$site_tarball" ]; then
  site=$(mktemp -d)
  $PY benchmarks/gpu/gpu_run_helper.py unpack-site "$site_tarball" "$site" > "$out/unpack_site.log" 2>&1
  export PYTHONPATH="$repo/src:$site${PYTHONPATH#"$repo/src"}"
fi
if ! $PY -c "import bert_kd.pipeline_registry, kedro_mlflow, mlflow, optuna" > "$out/imports.log" 2>&1; then
  cat "$out/imports.log" >&2
  echo "reproduce_gpu.sh: the project's imports fail on this machine (above; $out/imports.log)" >&2
  exit 1
fi

WORKERS=${WORKERS:-4}
BUDGET_S=${BUDGET_S:-420}
COMPILE=${COMPILE:-reduce-overhead}
GRID=${GRID:-method.weights.kd=0.2|0.5 method.weights.layer=0.2}
TASKS=${TASKS:-rte mrpc}
glue=${GLUE_DIR:-.gpu_carry/glue}
t=reproduce.tables.alp_kd_table1
extra=""
if $dry_run; then
  WORKERS=2 BUDGET_S=${BUDGET_S_DRY:-600} COMPILE=false TASKS=rte
  GRID="training.learning_rate=2e-5 method.weights.kd=0.5 method.weights.layer=0.2"
  $PY benchmarks/gpu/reproduce_gpu.py tiny-glue "$out/tiny_glue"
  glue=$out/tiny_glue
  $PY benchmarks/gpu/reproduce_gpu.py random-bert "$out/teacher" --tiny > "$out/teacher.log" 2>&1
  extra=",reproduce.methods=nkd alp,$t.teacher.max_seq_length=32,$t.teacher.training.epochs=1,$t.training.epochs=1"
else
  $PY benchmarks/gpu/reproduce_gpu.py random-bert "$out/teacher" --tokenizer "${TOKENIZER:-.gpu_carry/bert_tokenizer}" \
    > "$out/teacher.log" 2>&1
fi
glue=$(cd "$glue" && pwd)

# A scratch Kedro project (the checkout's conf), so nothing is written into the checkout.
project=$out/project
rm -rf "$project" && mkdir -p "$project/src" "$project/conf/local"
cp pyproject.toml "$project/" && cp -r conf/base conf/paper "$project/conf/"
params="reproduce.table=alp_kd_table1,reproduce.tasks=$TASKS,reproduce.seeds=1,reproduce.grid=$GRID"
params="$params,reproduce.results_dir=$out/results,reproduce.storage=sqlite:///$out/optuna.db,glue_dir=$glue"
params="$params,$t.teacher.model=$out/teacher,runtime.compile=$COMPILE,tracking.log_models=false,runtime.progress_bar=false$extra"
command="WORKERS=$WORKERS BUDGET_S=$BUDGET_S COMPILE=$COMPILE bash benchmarks/gpu/reproduce_gpu.sh$($dry_run && echo ' --dry-run') OUTDIR"

# MLflow's database made before the workers start: workers creating it at once race in its migrations.
$PY -c "import mlflow; mlflow.set_tracking_uri('$MLFLOW_TRACKING_URI'); mlflow.search_experiments()" > "$out/mlflow_init.log" 2>&1
cd "$project"
start=$(date +%s%N)
pids=()
for worker in $(seq "$WORKERS"); do
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-4} timeout -k 10 "$BUDGET_S" $PY -m kedro run --env paper --pipelines=reproduce \
    --params "$params" > "$out/worker$worker.log" 2>&1 & pids+=($!)
  if [ "$worker" = 1 ]; then  # the first worker creates the Optuna study before the others open it
    while [ ! -s "$out/optuna.db" ] && kill -0 "${pids[0]}" 2> /dev/null; do sleep 1; done
    sleep 3
  fi
done
codes=""
for pid in "${pids[@]}"; do code=0; wait "$pid" || code=$?; codes="$codes $code"; done
wall=$(( ($(date +%s%N) - start) / 1000000 ))
echo "workers' exit codes:$codes (124: stopped at BUDGET_S=$BUDGET_S)" | tee "$out/workers.txt"
cd "$repo"

chip=$($PY -c "import torch
name = torch.cuda.get_device_name().lower() if torch.cuda.is_available() else 'cpu'
print(next((c for c in ('h200', 'h100', 'a100', 'l40s', 'l4') if c in name), 'cpu' if name == 'cpu' else 'gpu'))")
$PY benchmarks/gpu/reproduce_gpu.py summarize "$out/results" --workers "$WORKERS" --wall-s "$(echo "$wall" | awk '{print $1/1000}')" \
  --command "$command" --json "$out/reproduce_gpu_$chip.json" --md "$out/reproduce_gpu_$chip.md"
