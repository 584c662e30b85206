#!/usr/bin/env bash
# The 21 trials cpu_protocol_v2 lacks, run with the teachers their keys now give (seeded since session 15, so the
# same on any machine up to rounding): a sensitivity check, never part of
# the table. The table's 139 trials were distilled from teachers nobody can retrain (an unseeded classification
# head until session 15, and their store lost with session 13's machine; README, "Closed at 139"), so the missing
# trials cannot join the table. Run here, they answer "would the 21 change the reading?": paper_gap.py
# --other-teacher reads the 139 plus these (labelled Mixed teachers) into tables/paper_gap_other_teacher.md.
#
# It empties the table folder of the checkout it runs in, so it refuses the main checkout; use a linked worktree:
#   git worktree add --detach ../fill HEAD && cd ../fill && \
#     PYTHON=<main>/.venv/bin/python OMP_NUM_THREADS=1 bash results/cpu_protocol_v2/fill_other_teacher.sh
# and, from the main checkout, `bash results/cpu_protocol_v2/commit_trials.sh --other-teacher ../fill` copies each
# finished JSON into results/cpu_protocol_v2/other_teacher/ and commits it with its reading (resumable: rerunning
# starts from the ones committed there).
# Two workers, one per core, each its own trials; the teachers' store is shared (its locks keep one trainer per key).
set -u
cd "$(dirname "$0")/../.."
# refuses a main checkout; the table folder gets the fill trials committed so far: skipped, and their teacher checked
source results/cpu_protocol_v2/worktree.sh other_teacher
PY=${PYTHON:-python}
LOGS=${LOGS:-fill_worker}
COMMON="reproduce.table=cpu_protocol_v2,glue_dir=../shared/glue,tracking.log_models=false,runtime.progress_bar=false"
trials() {  # worker tasks seeds methods: one `kedro run` of those trials of the table (finished ones skipped)
  echo "=== $(date -u +%FT%TZ) $2 seeds $3: $4" >> "$LOGS$1.log"
  $PY -m kedro run --pipeline=reproduce --params "$COMMON,reproduce.tasks=$2,reproduce.seeds=$3,reproduce.methods=$4" \
    >> "$LOGS$1.log" 2>&1 || echo "=== failed: $2 seeds $3 $4 (worker $1, see $LOGS$1.log)"
}
( trials 1 sst2 7 alp; trials 1 sst2 8 pkd; trials 1 sst2 "9 10" "nkd rkd pkd ckd" ) &
sleep 20
( trials 2 mrpc 8 kd; trials 2 sst2 6 rkd; trials 2 sst2 7 kd; trials 2 sst2 "9 10" "alp kd lwd ted" ) &
wait
echo "=== $(date -u +%FT%TZ) done"
