# Sourced by .ci/run and scripts/suite_time.sh: one pytest tier, printed and logged with the load around it.
#   tier NAME PYTEST-ARGS...   -> $TIER_LOGS/NAME.log (default data/08_reporting/suite_time); returns pytest's status
# scripts/run_record.py reads these logs (command, nice, load before/after, pytest's summary line).
tier() {
  local name=$1 logs=${TIER_LOGS:-data/08_reporting/suite_time}
  shift
  mkdir -p "$logs"
  { echo "command: pytest $*"; echo "nice: $(nice)"; echo "load before: $(uptime)"; } >"$logs/$name.log"
  HF_HUB_OFFLINE=1 KEDRO_DISABLE_TELEMETRY=1 "${PYTHON:-.venv/bin/python}" -m pytest "$@" 2>&1 | tee -a "$logs/$name.log"
  local code=${PIPESTATUS[0]}
  echo "load after: $(uptime)" >>"$logs/$name.log"
  return "$code"
}
