#!/usr/bin/env bash
# Replace the closed table by the complete seeded rerun (issue 19): once seeded/ holds every trial of the table, its
# JSONs become the table's and the closed table's 139 move to closed_139/ (kept: the seeded reading compares the two,
# and the other-teacher check reads them). Everything rendered from the table is rendered again — the table
# (results_only), the paper-gap reading and README block, each term's gradient share (from the trials' own JSONs), the
# seeded and other-teacher readings — and staged, not committed: the README's "What v2 can say" and the v2 README's
# status are prose to rewrite from the new reading first (tests/sweep/test_committed_results.py fails until they no
# longer say "closed"). Then run the tests and commit.
#   bash results/cpu_protocol_v2/commit_trials.sh --seeded ../seeded   # the last batch, if the loop left it
#   bash results/cpu_protocol_v2/promote_seeded.sh
# Refuses an incomplete seeded/, a second promotion, and uncommitted changes in the results folder or README.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
here=results/cpu_protocol_v2
name=$(basename "$0")
if [ -d "$here/closed_139" ]; then
  echo "$name: already promoted ($here/closed_139 exists); nothing done" >&2; exit 1
fi
if [ -n "$(git status --porcelain -- "$here" README.md)" ]; then
  echo "$name: uncommitted changes in $here or README.md; commit or stash them first; nothing done" >&2; exit 1
fi
# seeded/'s trials against the table's total (seeded_files refuses a foreign file, a changed copy of other_teacher/'s
# trials, or a second teacher on a task); nothing is rendered yet
counts=$(PYTHONPATH=src "$PY" -c "import sys; sys.path.insert(0, '$here'); import paper_gap as p; \
print(len(p.seeded_files()), p.table_total())" | tail -n 1)
read -r done total <<< "$counts"
if [ "$done" != "$total" ]; then
  echo "$name: seeded/ has $done of the table's $total trials; nothing done (finish rerun_seeded.sh first)" >&2; exit 1
fi
trap 'echo "$name: failed; to undo: git reset -q HEAD -- $here README.md && git checkout -- $here README.md && git clean -fdq -- $here" >&2' ERR
mkdir "$here/closed_139"
git mv "$here"/*.json "$here/closed_139/"
git mv "$here"/seeded/*.json "$here/"
rmdir "$here/seeded"
export KEDRO_DISABLE_TELEMETRY=1 HF_HUB_OFFLINE=1
# every trial since session 14 carries its gradient shares: no MLflow store is needed (gradient_shares.py opens none)
PYTHONPATH=src "$PY" "$here/gradient_shares.py" --tracking-uri "sqlite:///$(mktemp -d)/none.db" > /dev/null
PYTHONPATH=src "$PY" "$here/paper_gap.py" --seeded > /dev/null
PYTHONPATH=src "$PY" "$here/paper_gap.py" --other-teacher > /dev/null
STAGE_ONLY=1 bash "$here/commit_trials.sh"
echo "$name: staged. Rewrite README.md's \"What v2 can say\" and $here/README.md's status from $here/tables/paper_gap.md," \
     "run tests/sweep/test_committed_results.py, then commit."
