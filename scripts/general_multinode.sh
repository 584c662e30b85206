#!/usr/bin/env bash
# General distillation on several machines: the same command on every node, joined by torchrun's c10d
# rendezvous (a TCP store on one host: RDZV_ENDPOINT), the project folder (store, checkpoints, corpus shards)
# on a shared file system. Rank 0 tokenizes the corpus and writes the store; every rank trains its slice of
# each global batch; a killed job rerun with the same command resumes from the last checkpoint.
#
#   NNODES=4 NPROC_PER_NODE=8 RDZV_ENDPOINT=node0:29400 RDZV_ID=general-1 \
#       scripts/general_multinode.sh [--dry-run] [extra --params, e.g. "general.training.max_steps=100000"]
#
# --dry-run prints the command instead of running it (tests/test_general_multinode.py checks it).
set -euo pipefail
dry_run=0
if [[ "${1:-}" == "--dry-run" ]]; then dry_run=1; shift; fi
: "${NNODES:?set NNODES (machines)}"
: "${RDZV_ENDPOINT:?set RDZV_ENDPOINT (host:port of the rendezvous store, reachable from every node)}"
NPROC_PER_NODE="${NPROC_PER_NODE:-1}"
RDZV_ID="${RDZV_ID:-bert-kd-general}"
params="glue_dir=${GLUE_DIR:-data/01_raw/glue}${1:+,$1}"
command=(.venv/bin/torchrun --nnodes "$NNODES" --nproc_per_node "$NPROC_PER_NODE"
  --rdzv_backend c10d --rdzv_endpoint "$RDZV_ENDPOINT" --rdzv_id "$RDZV_ID"
  -m kedro run --pipelines=distill_general --params "$params")
if (( dry_run )); then printf '%q ' "${command[@]}"; echo; exit 0; fi
exec "${command[@]}"
