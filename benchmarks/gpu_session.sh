#!/usr/bin/env bash
# One device call (issues 41 item 1 and 37 item 5), run from the repository root of the device's copy, where
# gpu_payload/payload.tgz holds this branch's src/, benchmarks/, tests/ (the device copies another checkout), the
# reference bench, the bill's resolved entries and MIR graph set, and a tokenizer-only stand-in for the MiniLM package
# (its weights are not needed: random-bert-base borrows only the vocabulary). The checkout's own src/ is "before".
#   bash benchmarks/gpu_session.sh full     # reference, before/after MORES, CUDA tests, the bill
#   bash benchmarks/gpu_session.sh second   # reference and after MORES again, CUDA tests, the bill of $BILL_MODELS
set -u
MODE=${1:-full}
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT" /tmp/p
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__, torch.cuda.is_available(), torch.cuda.get_device_name())"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
tar -xzf gpu_payload/payload.tgz -C /tmp/p
export LONGRANK_SHARED=/tmp/p/shared
NEW=/tmp/p/src:/tmp/p/shim
OLD=$PWD/src:/tmp/p/shim
BILL_MODELS=${BILL_MODELS:-}
timeout 70 python3 /tmp/p/mores_reference.py 2>&1 | tee "$OUT/reference.log"
if [ "$MODE" = full ]; then
  PYTHONPATH=$OLD timeout 110 python3 /tmp/p/benchmarks/mores_gpu_compare.py --label before --warmup 1 \
    --out "$OUT/mores_before.json" 2>&1 | tee "$OUT/compare.log"
fi
PYTHONPATH=$NEW timeout 110 python3 /tmp/p/benchmarks/mores_gpu_compare.py --label after --warmup 1 \
  --out "$OUT/mores_after.json" 2>&1 | tee -a "$OUT/compare.log"
(cd /tmp/p && PYTHONPATH=$NEW timeout 70 python3 -m pytest -q -p no:cacheprovider tests/test_mores.py -k cuda 2>&1 \
  | tail -15 | tee "$OUT/cuda_tests.log")
(cd /tmp/p && PYTHONPATH=$NEW:/tmp/p/tests timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_precision.py \
  -k "cuda and mores" 2>&1 | tail -8 | tee -a "$OUT/cuda_tests.log")
PYTHONPATH=$NEW timeout "${BILL_TIMEOUT:-150}" python3 /tmp/p/benchmarks/gpu_bill.py --entries /tmp/p/entries.json \
  --mir-records /tmp/p/mir_records.pkl --device cuda --budget-s "${BILL_BUDGET:-120}" --commit "${COMMIT:-}" \
  ${BILL_MODELS:+--models $BILL_MODELS} --out "$OUT/gpu_bill_$MODE.json" 2>&1 | grep -v "annotate\|it/s" | tee "$OUT/bill_$MODE.log"
