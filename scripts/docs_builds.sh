#!/usr/bin/env bash
# The strict documentation build, N times in a row, each on a fresh clone of HEAD (a flaky build — an anchor that
# exists only sometimes — fails some of them). Uses this checkout's .venv; prints one line a build and writes a
# machine-made record.
#   bash scripts/docs_builds.sh [N=10] [RECORD=benchmarks/results/docs_builds.json]
set -uo pipefail
cd "$(dirname "$0")/.."
n=${1:-10}
out=${2:-benchmarks/results/docs_builds.json}
python=$PWD/.venv/bin/python
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
results=()
for i in $(seq 1 "$n"); do
  git clone -q . "$work/clone$i"
  start=$(date +%s)
  ( cd "$work/clone$i" && NO_MKDOCS_2_WARNING=1 "$python" -m mkdocs build --strict --quiet --site-dir "$work/site$i" ) \
    >"$work/build$i.log" 2>&1
  rc=$?
  seconds=$(( $(date +%s) - start ))
  echo "build $i: exit $rc in ${seconds} s"
  [ "$rc" -eq 0 ] || tail -5 "$work/build$i.log"
  results+=("{\"build\": $i, \"exit\": $rc, \"seconds\": $seconds}")
  rm -rf "$work/clone$i" "$work/site$i"
done
commit=$(git rev-parse HEAD)
joined=$(IFS=,; echo "${results[*]}")
"$python" - "$out" "$commit" "[$joined]" <<'PY'
import json, os, sys
from datetime import UTC, datetime
out, commit, builds = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
record = {"what": "mkdocs build --strict on fresh clones (scripts/docs_builds.sh)", "commit": commit,
          "builds": builds, "passed": sum(b["exit"] == 0 for b in builds),
          "recorded": datetime.now(UTC).isoformat(timespec="seconds")}
tmp = out + ".tmp"
with open(tmp, "w", encoding="utf-8") as f:
    f.write(json.dumps(record, indent=2) + "\n")
os.replace(tmp, out)
print(f"record: {out} ({record['passed']} of {len(builds)} passed)")
PY
