#!/usr/bin/env bash
# ALP-KD Figure 3 for each score of α (docs/fidelity.md): the main job (`kedro run --pipelines=distill_alp`, 6,000
# SST-2 rows, its MiniLM-L6 teacher from the store) once per (similarity, student depth), students started from the
# pre-trained checkpoint's first layers as ALP-KD's are; each run draws α of its trained student for 10 random SST-2
# dev examples (figures.alp_attention_examples, the paper's 10). The figures and tables land in results/alp_alpha/,
# and benchmarks/alp_alpha.py writes the statement (results/alp_alpha/README.md) from them.
#   bash benchmarks/alp_alpha.sh                 # every variant and depth (≈ 2 min each on an idle 2-core machine)
#   VARIANTS="dot cosine" LAYERS="2" bash benchmarks/alp_alpha.sh
# A finished (variant, depth) is skipped (its CSV exists); the teacher is trained once and reused from the store.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
out=results/alp_alpha
mkdir -p "$out"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 KEDRO_DISABLE_TELEMETRY=1
for layers in ${LAYERS:-2 4}; do
  for similarity in ${VARIANTS:-dot scaled_dot cosine ln_scaled_dot}; do
    name=figure3_${similarity}_${layers}layers
    [ -f "$out/$name.csv" ] && { echo "$name: done"; continue; }
    echo "=== $(date -u +%FT%TZ) $name"
    "$python" -m kedro run --pipelines=distill_alp --params \
      "glue_dir=${GLUE_DIR:-../shared/glue},tracking.enabled=false,runtime.progress_bar=false,student.init=pretrained,student.num_layers=$layers,distill_methods.alp.similarity=$similarity" \
      >"data/08_reporting/$name.log" 2>&1 || { tail -20 "data/08_reporting/$name.log"; exit 1; }
    grep -E "epoch [0-9]+:|near one-hot" "data/08_reporting/$name.log" | cut -c1-240 || true
    cp data/08_reporting/alp_kd_figure3_alp.png "$out/$name.png"
    cp data/08_reporting/alp_kd_figure3_alp.csv "$out/$name.csv.tmp" && mv "$out/$name.csv.tmp" "$out/$name.csv"
  done
done
"$python" benchmarks/alp_alpha.py "$out" >"$out/variants.md.tmp" && mv "$out/variants.md.tmp" "$out/variants.md" && cat "$out/variants.md"
