#!/usr/bin/env bash
# Commit finished v2 trials with everything rendered from them, in one commit (issue 19: resumable, piecewise).
#   bash results/cpu_protocol_v2/commit_trials.sh [WORKER_CHECKOUT]
# WORKER_CHECKOUT: a second checkout (git worktree) where run.sh's workers write their JSONs, so that edits in
# this one never disturb them; its new JSONs are copied here first. Then: the table from the results folder
# alone (`results_only`, nothing trains), the paper-gap reading and the README's v2 block (paper_gap.py), each
# term's gradient share from the worker's MLflow store (gradient_shares.py),
# and one commit of results/cpu_protocol_v2 and README.md (STAGE_ONLY=1: staged only). Nothing new: nothing is committed.
#   bash results/cpu_protocol_v2/commit_trials.sh --other-teacher FILL_WORKTREE
# The same for fill_other_teacher.sh's trials (a sensitivity check, never the table): the worktree's new JSONs go
# to other_teacher/, and only tables/paper_gap_other_teacher.{md,png} are re-rendered and committed with them.
#   bash results/cpu_protocol_v2/commit_trials.sh --seeded SEEDED_WORKTREE
# The same for rerun_seeded.sh's trials (the table rerun on reproducible teachers): every JSON of the worktree's table
# folder that seeded/ lacks goes there, with tables/paper_gap_seeded.{md,png}.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
here=results/cpu_protocol_v2
if [ "${1:-}" = "--other-teacher" ]; then
  [ $# -eq 2 ] || { echo "usage: commit_trials.sh --other-teacher FILL_WORKTREE" >&2; exit 2; }
  for f in "$2/$here"/*.json; do
    [ -e "$f" ] && [ ! -e "$here/$(basename "$f")" ] && [ ! -e "$here/other_teacher/$(basename "$f")" ] && cp "$f" "$here/other_teacher/"
  done
  new=$(git status --porcelain --untracked-files=all -- "$here/other_teacher" | grep -c '\.json$' || true)
  if [ "$new" -eq 0 ]; then echo "no new trials"; exit 0; fi
  count=$(PYTHONPATH=src "$PY" "$here/paper_gap.py" --other-teacher | grep -o '^[0-9]* of [0-9]* verdicts change')
  git add "$here/other_teacher" "$here/tables/paper_gap_other_teacher.md" "$here/tables/paper_gap_other_teacher.png"
  plural=s; [ "$new" -eq 1 ] && plural=
  git commit -qm "CPU protocol v2, other teacher: $new more trial$plural ($(ls "$here"/other_teacher/*.json | wc -l) of 21; $count)"
  git log --oneline -1
  exit 0
fi
if [ "${1:-}" = "--seeded" ]; then
  [ $# -eq 2 ] || { echo "usage: commit_trials.sh --seeded SEEDED_WORKTREE" >&2; exit 2; }
  [ ! -d "$here/closed_139" ] || { echo "commit_trials.sh: the seeded rerun is the table since promote_seeded.sh" >&2; exit 1; }
  mkdir -p "$here/seeded"
  for f in "$2/$here"/*.json; do
    [ -e "$f" ] && [ ! -e "$here/seeded/$(basename "$f")" ] && cp "$f" "$here/seeded/"
  done
  new=$(git status --porcelain --untracked-files=all -- "$here/seeded" | grep -c '\.json$' || true)
  if [ "$new" -eq 0 ]; then echo "no new trials"; exit 0; fi
  # the reading's last line: "<k> of <m> verdicts tested so far differ … <done> of <the table's total> trials. Made by: …"
  summary=$(PYTHONPATH=src "$PY" "$here/paper_gap.py" --seeded | tail -n 1)
  count=$(grep -o '^[0-9]* of [0-9]* verdicts tested so far differ' <<< "$summary")
  trials=$(grep -o '[0-9]* of [0-9]* trials' <<< "$summary")
  git add "$here/seeded" "$here/tables/paper_gap_seeded.md" "$here/tables/paper_gap_seeded.png"
  plural=s; [ "$new" -eq 1 ] && plural=
  git commit -qm "CPU protocol v2, seeded rerun: $new more trial$plural (${trials% trials}; $count from the closed table's)"
  git log --oneline -1
  exit 0
fi
if [ $# -gt 0 ]; then
  for f in "$1/$here"/*.json; do
    [ -e "$f" ] && [ ! -e "$here/$(basename "$f")" ] && cp "$f" "$here/"
  done
fi
new=$(git status --porcelain --untracked-files=all -- "$here" | grep -c '\.json$' || true)
if [ "$new" -eq 0 ]; then echo "no new trials"; exit 0; fi
export KEDRO_DISABLE_TELEMETRY=1 HF_HUB_OFFLINE=1
log=$(mktemp)
"$PY" -m kedro run --pipeline=reproduce --params "reproduce.table=cpu_protocol_v2,reproduce.results_only=true,glue_dir=../shared/glue,tracking.enabled=false,runtime.progress_bar=false" > "$log" 2>&1 \
  || { echo "the results_only render failed, nothing committed (log: $log)"; exit 1; }
# every seed of a row from the same teacher (a teacher retrained on another CPU's kernels scores differently)
if grep -q "Mixed teachers" "$here/tables/cpu_protocol_v2.md"; then
  echo "mixed teachers (see $here/tables/cpu_protocol_v2.md): nothing committed; move the trials of the other teacher aside"; exit 1
fi
# the reading's last line: "<finished> of <the table's total> trials finished. Made by: …"
count=$(PYTHONPATH=src "$PY" "$here/paper_gap.py" | tail -n 1)
count=${count%% trials finished*}
# each term's share of the student's gradient, from the workers' MLflow store (when there is one)
if [ $# -gt 0 ] && [ -f "$1/mlflow.db" ]; then
  PYTHONPATH=src "$PY" "$here/gradient_shares.py" --tracking-uri "sqlite:///$(cd "$1" && pwd)/mlflow.db" > /dev/null 2>>"$log" \
    || echo "gradient shares not re-rendered (log: $log)"
fi
git add "$here" README.md
if [ "${STAGE_ONLY:-0}" = 1 ]; then echo "staged, not committed ($count)"; exit 0; fi  # promote_seeded.sh
plural=s; [ "$new" -eq 1 ] && plural=
git commit -qm "CPU protocol v2: $new more trial$plural ($count), tables and paper-gap reading re-rendered"
git log --oneline -1
