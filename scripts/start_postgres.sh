#!/usr/bin/env bash
# Start a local PostgreSQL for trying multi-worker sweeps (Optuna storage + MLflow backend).
#
#   scripts/start_postgres.sh            # start (installs Debian's postgresql if missing)
#   scripts/start_postgres.sh stop       # stop it (stop immediate: at once, as a crash would)
#
# Data directory: data/09_sweeps/postgres (PGDATA env overrides), listening on 127.0.0.1:$PGPORT
# (default 5433, so it never collides with a system PostgreSQL on 5432). Creates the databases
# bert_kd_optuna and bert_kd_mlflow owned by $PGUSER_NAME (default: bert_kd), trust auth on
# localhost only. Prints the URLs to use:
#   reproduce.storage=postgresql+psycopg://bert_kd@127.0.0.1:5433/bert_kd_optuna
#   mlflow server --backend-store-uri postgresql+psycopg://bert_kd@127.0.0.1:5433/bert_kd_mlflow ...
# For a real multi-machine set-up use a managed/secured server instead (password auth, TLS).
set -euo pipefail
cd "$(dirname "$0")/.."

PGPORT=${PGPORT:-5433}
PGDATA=${PGDATA:-$PWD/data/09_sweeps/postgres}
DB_USER=${PGUSER_NAME:-bert_kd}
LOG="$PGDATA/server.log"

find_bin() {  # newest Debian PostgreSQL bin dir, or whatever is on PATH
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$dir" ] && [ -x "$dir/pg_ctl" ]; then echo "$dir"; return; fi
  if command -v pg_ctl >/dev/null 2>&1; then dirname "$(command -v pg_ctl)"; return; fi
  return 1
}

BIN=$(find_bin || true)
if [ -z "$BIN" ]; then
  echo "PostgreSQL not found; installing Debian's postgresql package (needs root or sudo)"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q postgresql
  BIN=$(find_bin)
fi

# PostgreSQL refuses to run as root: run the server as the `postgres` system user then.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

if [ "${1:-start}" = "stop" ]; then
  as_owner "$BIN/pg_ctl" -D "$PGDATA" stop -m "${2:-fast}"  # immediate: as a crash (no shutdown checkpoint)
  exit 0
fi

mkdir -p "$PGDATA"
if [ "$(id -u)" -eq 0 ]; then chown -R postgres: "$PGDATA"; fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  as_owner "$BIN/initdb" -D "$PGDATA" --auth=trust --encoding=UTF8 --no-locale -U postgres >/dev/null
  echo "initialised $PGDATA"
fi
if as_owner "$BIN/pg_ctl" -D "$PGDATA" status >/dev/null 2>&1; then
  echo "already running"
else
  if ! as_owner "$BIN/pg_ctl" -D "$PGDATA" -l "$LOG" -w \
    -o "-c listen_addresses=127.0.0.1 -p $PGPORT -k $PGDATA" start >/dev/null; then
    tail -n 5 "$LOG" >&2 || true  # the server's reason (a port in use, a damaged data directory)
    echo "start_postgres.sh: PostgreSQL did not start on 127.0.0.1:$PGPORT (above; $LOG)" >&2
    exit 1
  fi
  echo "started on 127.0.0.1:$PGPORT (log: $LOG)"
fi

psql_admin() { "$BIN/psql" -h 127.0.0.1 -p "$PGPORT" -U postgres -v ON_ERROR_STOP=1 -qtA "$@"; }
if [ -z "$(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname='$DB_USER'")" ]; then
  psql_admin -c "CREATE ROLE $DB_USER LOGIN"
fi
for db in bert_kd_optuna bert_kd_mlflow; do
  if [ -z "$(psql_admin -c "SELECT 1 FROM pg_database WHERE datname='$db'")" ]; then
    psql_admin -c "CREATE DATABASE $db OWNER $DB_USER"
    echo "created database $db"
  fi
done
echo "Optuna storage: postgresql+psycopg://$DB_USER@127.0.0.1:$PGPORT/bert_kd_optuna"
echo "MLflow backend: postgresql+psycopg://$DB_USER@127.0.0.1:$PGPORT/bert_kd_mlflow"
