# Sourced by fill_other_teacher.sh and rerun_seeded.sh, which run the table's trials with teachers other than the closed
# table's: in a linked worktree only (each empties the table folder of the checkout it runs in), with that folder holding
# just the JSONs of the subfolders named as arguments (finished trials, skipped, and the teachers check_teacher compares
# each new teacher with).
TABLE=results/cpu_protocol_v2
if [ "$(git rev-parse --git-dir)" = "$(git rev-parse --git-common-dir)" ]; then
  echo "$(basename "$0"): run it in a linked worktree (git worktree add), not the main checkout:" \
       "it deletes the table's trial JSONs of the checkout it runs in." >&2
  exit 1
fi
rm -f "$TABLE"/*.json
for folder in "$@"; do
  cp "$TABLE/$folder"/*.json "$TABLE"/ 2>/dev/null || true
done
