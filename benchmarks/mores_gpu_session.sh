#!/usr/bin/env bash
# One device call for MORES's GPU speed goals (docs/studies/speed.md), run from the repository root of the device's copy of the working tree.
# gpu_payload/ (an ignored folder, carried) holds: before/ (`git archive <before> src/longrank workflow/schemas`: the schema travels with the code), mores_reference.py
# (../shared/bench's, which does not travel) and shim/ (a tokenizer-only stand-in for the MiniLM package:
# random-bert-base borrows only its vocabulary). In order: the reference, the project's bench on the code before
# and after (benchmarks/mores_gpu_compare.py: timings, Reuse-S2 profiles, fused-path equivalence), the CUDA cases of
# tests/test_mores.py. Everything lands in $OUT.
set -u
OUT=${OUT:-/tmp/gpu-out}
P=$PWD/gpu_payload
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
python3 -c "import torch, transformers, triton; print(torch.__version__, transformers.__version__, triton.__version__, torch.cuda.get_device_name())"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
timeout 100 python3 "$P/mores_reference.py" 2>&1 | tee "$OUT/reference.log"
if [ "${BEFORE:-1}" = 1 ]; then
  PYTHONPATH=$P/before/src:$P/shim timeout 150 python3 benchmarks/mores_gpu_compare.py --label before --warmup 1 \
    --out "$OUT/mores_before.json" 2>&1 | grep -v "^\s*$" | tee "$OUT/compare.log"
fi
PYTHONPATH=$PWD/src:$P/shim timeout 150 python3 benchmarks/mores_gpu_compare.py --label after --warmup 1 \
  --out "$OUT/mores_after.json" 2>&1 | grep -v "^\s*$" | tee -a "$OUT/compare.log"
PYTHONPATH=$PWD/src:$P/shim timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_mores.py -k cuda 2>&1 \
  | tail -25 | tee "$OUT/cuda_tests.log"
