#!/usr/bin/env bash
# CPU protocol v2 rerun whole on reproducible teachers (issue 19, session 17 on). The committed table is closed at 139
# of 160 trials: its teachers drew their heads unseeded (fixed in session 15) and nobody can retrain them. This runs
# every trial of the table again with the teachers the same keys give since the fix (SST-2 86.93, MRPC 80.15 accuracy
# on any machine; other_teacher/'s 21 trials are this rerun's for their keys and are copied in, so they are skipped and
# every new teacher is checked against theirs). Once all 160 have run, the rerun replaces the closed table.
#
# It empties the table folder of the checkout it runs in, so it refuses the main checkout; use a linked worktree:
#   git worktree add --detach ../seeded HEAD && cd ../seeded && \
#     PYTHON=<main>/.venv/bin/python OMP_NUM_THREADS=1 bash results/cpu_protocol_v2/rerun_seeded.sh
# and, from the main checkout, `bash results/cpu_protocol_v2/commit_trials.sh --seeded ../seeded` copies each finished
# JSON into results/cpu_protocol_v2/seeded/ and commits it with tables/paper_gap_seeded.{md,png}
# (`commit_loop.sh --seeded ../seeded` does that every 20 minutes). Resumable: rerunning starts from seeded/'s trials.
# run.sh's order (seeds 1–5 of every row, then 6–8, then SST-2's 9–10) with WORKERS=2 (one per core) by default.
set -u
cd "$(dirname "$0")/../.."
if [ -d results/cpu_protocol_v2/closed_139 ]; then
  echo "rerun_seeded.sh: the seeded rerun is the table since promote_seeded.sh; rerun a trial with run.sh" >&2; exit 1
fi
source results/cpu_protocol_v2/worktree.sh seeded other_teacher
ALLOW_CLOSED=1 WORKERS=${WORKERS:-2} LOGS=${LOGS:-seeded_worker} bash results/cpu_protocol_v2/run.sh
