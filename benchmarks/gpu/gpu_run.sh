# The prepared GPU run (docs/gpu.md, "The prepared GPU run"):
#   bash benchmarks/gpu/gpu_run.sh [--dry-run] [--site TARBALL] OUTDIR
# Runs, each with its log and wall time in OUTDIR: (1) benchmarks/gpu/gpu_check.py, (2) the main job
# `kedro run --pipelines=distill_alp`, (2b) the same job with runtime.compile=reduce-overhead (eager in the
# dry run), teacher and student under their own keys, (3) a small `distill_baselines` (--env compare), (4) a 2-worker
# `reproduce` slice (cpu_protocol, NKD, one task, seeds 1 and 2: one trial per worker), every kedro run
# tracked in OUTDIR/mlflow.db; then OUTDIR/summary.md. Kedro runs in a scratch copy of the project's
# conf (OUTDIR/project), so nothing is written into the checkout (data/, results/).
# Normal mode (a GPU machine, possibly offline; over 8 minutes on an H100, docs/gpu.md): uses the machine's Python and its CUDA torch as
# they are (torch is never reinstalled); if benchmarks/wheels/ exists, the project's pure-Python pins are
# installed from it first (pip install --no-index --find-links benchmarks/wheels, then -e . --no-deps).
# --site TARBALL: instead of installing, unpack a ready site-packages tarball (made on a machine with
# internet by `python benchmarks/gpu/gpu_run_helper.py bundle`) into a scratch folder and put it on PYTHONPATH:
# nothing to resolve on a machine that can reach no index. Its checksum (TARBALL.sha256, written by bundle) is
# verified first; a tarball that is missing, damaged, without its checksum, climbing out of its folder or carrying
# a start-up module stops the script here with the reason (exit 2). The scratch folder goes when the script ends.
# --dry-run: the same steps on the CPU with a tiny local teacher and tiny SST-2 (benchmarks/gpu/gpu_run_helper.py).
# GLUE_DIR (default ../shared/glue, relative to the checkout); PYTHON (default python);
# TIMEOUT_GPU_CHECK, TIMEOUT_DISTILL_ALP, TIMEOUT_DISTILL_ALP_COMPILED, TIMEOUT_DISTILL_BASELINES, TIMEOUT_REPRODUCE: seconds a step may
# run before it is stopped (exit 124 in steps.tsv; default: no limit), for a machine lent for minutes;
# GPU_RUN_SKIP: step names not to run this time (space-separated), e.g. after a partial run.
# GPU_CHECK_COMPILE: the torch.compile backends (or inductor modes) gpu_check also times, each also with the live
# teacher compiled (default "reduce-overhead"; empty: none); GPU_CHECK_ARGS: more gpu_check arguments.
set -euo pipefail
usage="usage: bash benchmarks/gpu/gpu_run.sh [--dry-run] [--site TARBALL] OUTDIR"
dry_run=false
site_tarball=""
while [ $# -gt 1 ]; do
  case "$1" in
    --dry-run) dry_run=true; shift ;;
    --site)
      if [ ! -f "$2" ]; then echo "gpu_run.sh: --site $2: no such file (the tarball of gpu_run_helper.py bundle)" >&2; exit 2; fi
      site_tarball=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
    *) break ;;
  esac
done
if [ $# -ne 1 ] || [ -z "$1" ] || [ "${1#-}" != "$1" ]; then echo "$usage" >&2; exit 2; fi
repo=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
PY=${PYTHON:-python}
cd "$repo"
glue=$(cd "${GLUE_DIR:-../shared/glue}" 2>/dev/null && pwd || echo "${GLUE_DIR:-../shared/glue}")
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} TRANSFORMERS_OFFLINE=${TRANSFORMERS_OFFLINE:-1}  # a GPU machine may have no internet
export PYTHONPATH="$repo/src${PYTHONPATH:+:$PYTHONPATH}" KEDRO_DISABLE_TELEMETRY=1 MLFLOW_TRACKING_URI="sqlite:///$out/mlflow.db"
: > "$out/steps.tsv"

if [ -n "$site_tarball" ]; then
  # A ready site-packages folder first on the path: the carried pins win over the machine's copies.
  site=$(mktemp -d)
  trap 'rm -rf "$site"' EXIT  # the unpacked site is this run's only
  if ! $PY benchmarks/gpu/gpu_run_helper.py unpack-site "$site_tarball" "$site" > "$out/unpack_site.log" 2>&1; then
    tail -n 5 "$out/unpack_site.log" >&2
    echo "gpu_run.sh: --site $site_tarball cannot be used (above; $out/unpack_site.log)" >&2
    exit 2
  fi
  export PYTHONPATH="$repo/src:$site${PYTHONPATH#"$repo/src"}"
elif ! $dry_run && [ -d benchmarks/wheels ]; then
  # The wheels first (offline: --no-index, so a missing one fails loudly), then the project itself with
  # --no-deps: its torch==2.13.0 pin would otherwise replace the machine's CUDA torch, which is kept as it is.
  { $PY -m pip install --no-index --find-links benchmarks/wheels benchmarks/wheels/*.whl \
      && $PY -m pip install --no-index --no-deps -e .; } > "$out/pip_install.log" 2>&1
fi

# Everything the steps import, checked once before any of them runs: a package missing from the machine or
# the carried site fails here in seconds, with its traceback, instead of inside every step.
if ! $PY -c "import bert_kd.pipeline_registry, kedro_mlflow, mlflow, optuna
from transformers import AutoModelForSequenceClassification, get_linear_schedule_with_warmup" > "$out/imports.log" 2>&1; then
  cat "$out/imports.log" >&2
  echo "gpu_run.sh: the project's imports fail on this machine (above; $out/imports.log)" >&2
  exit 1
fi

step() {  # step NAME COMMAND...: run it, log to OUTDIR/NAME.log, record NAME, exit code, wall seconds
  local name=$1 start code=0
  shift
  case " ${GPU_RUN_SKIP:-} " in *" $name "*) echo "=== $name: skipped (GPU_RUN_SKIP)"; return 0 ;; esac
  start=$(date +%s%N)
  "$@" > "$out/$name.log" 2>&1 || code=$?
  local tenths=$(( ($(date +%s%N) - start) / 100000000 ))
  printf '%s\t%s\t%d.%d\n' "$name" "$code" $((tenths / 10)) $((tenths % 10)) >> "$out/steps.tsv"
  echo "=== $name: exit $code"
}

limited() {  # limited NAME COMMAND...: COMMAND stopped after $TIMEOUT_<NAME> seconds when that is set
  local var
  var=TIMEOUT_$(echo "$1" | tr '[:lower:]' '[:upper:]')
  shift
  if [ -n "${!var:-}" ]; then timeout -k 10 "${!var}" "$@"; else "$@"; fi
}

# A scratch Kedro project: the checkout's conf, its pyproject.toml; bert_kd is imported from src (PYTHONPATH).
project=$out/project
rm -rf "$project" && mkdir -p "$project/src" "$project/conf/local"
cp pyproject.toml "$project/"
cp -r conf/base conf/compare "$project/conf/"

common="glue_dir=$glue,tracking.log_models=false,runtime.progress_bar=false"
sweep="reproduce.table=cpu_protocol,reproduce.methods=nkd,reproduce.results_dir=$out/results,reproduce.storage=sqlite:///$out/optuna.db"
if $dry_run; then
  $PY benchmarks/gpu/gpu_run_helper.py tiny "$out"
  glue=$out/tiny_glue
  tiny="teacher.model=$out/tiny_teacher,teacher.max_seq_length=32,training.epochs=1,max_train_samples=64,runtime.checkpoint_every_steps=0"
  common="glue_dir=$glue,task=sst2,tracking.log_models=false,runtime.progress_bar=false,$tiny"
  t=reproduce.tables.cpu_protocol
  sweep="$sweep,reproduce.tasks=sst2,$t.teacher.model=$out/tiny_teacher,$t.teacher.max_seq_length=32,$t.teacher.training.epochs=1,$t.training.epochs=1,$t.data.sst2.max_train_samples=64,runtime.checkpoint_every_steps=0"
  check_args=(--tiny)
  compiled=eager  # the compiled loop's code path (TorchDynamo capture; aot_eager and inductor take minutes on a CPU)
  baselines_extra=",student.training.epochs=2"  # TinyBERT's two stages need two epochs
else
  sweep="$sweep,reproduce.tasks=mrpc"
  read -r -a compile_backends <<< "${GPU_CHECK_COMPILE-reduce-overhead}"
  read -r -a extra_check_args <<< "${GPU_CHECK_ARGS:-}"
  check_args=(--worker-seconds 10 --profile --compile "${compile_backends[@]}" --compile-teacher "${extra_check_args[@]}")
fi
baselines_extra=${baselines_extra:-}
compiled=${compiled:-reduce-overhead}
sweep="$sweep,glue_dir=$glue,tracking.log_models=false,runtime.progress_bar=false"

reproduce_two_workers() {  # two workers on one Optuna study, as scripts/sweep.sh starts them
  local code=0 w1 w2
  limited reproduce $PY -m kedro run --pipelines=reproduce --params "$sweep,reproduce.seeds=1" > "$out/reproduce_worker1.log" 2>&1 & w1=$!
  sleep 5  # the first worker creates the study before the second opens it
  limited reproduce $PY -m kedro run --pipelines=reproduce --params "$sweep,reproduce.seeds=2" > "$out/reproduce_worker2.log" 2>&1 & w2=$!
  wait $w1 || code=$?
  wait $w2 || code=$?
  return $code
}

step gpu_check limited gpu_check $PY benchmarks/gpu/gpu_check.py "${check_args[@]}" --json "$out/gpu_check.json"
cd "$project"
step distill_alp limited distill_alp $PY -m kedro run --pipelines=distill_alp --params "$common"
step distill_alp_compiled limited distill_alp_compiled $PY -m kedro run --pipelines=distill_alp --params "$common,runtime.compile=$compiled"
step distill_baselines limited distill_baselines $PY -m kedro run --env compare --pipelines=distill_baselines --params "$common$baselines_extra"
step reproduce reproduce_two_workers
cd "$repo"
$PY benchmarks/gpu/gpu_run_helper.py summary "$out"
