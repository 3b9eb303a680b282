"""MORES Table 4 on one GPU, the variants whose speed-ups the speed page reports: the BERT ranker, 2xIB Reuse-S1 and Reuse-S2
with the store resident on the GPU, BERT-base dimensions, 512 document tokens, 1,000 candidates in one batch, fp32
and bf16 in one process (the stores written once), timed by ``longrank mores_speed``'s own functions (the same
variants, the same alternating timer), plus a ``torch.profiler`` table of a Reuse-S2 pass per precision.

    python benchmarks/mores_gpu_compare.py --out mores_after.json

Run it with ``PYTHONPATH`` at an older ``src`` to time that version beside this one in the same session (the
functions it calls exist in both). Where the model has the fused path (``reads_rows``), it also checks that the
path's scores equal the PyTorch-attention path's on the same candidates (largest difference over the scores'
spread).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from longrank.bench import mores_speed
from longrank.bench.timing import time_alternating
from longrank.models.modules.encoders import RANDOM_BERT_BASE, load_encoder, load_tokenizer
from longrank.precision import autocast


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidates", type=int, default=1000)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--precisions", nargs="+", default=["fp32", "bf16"])
    parser.add_argument("--label", default="after")
    parser.add_argument("--device", default="cuda", help="cpu: a smoke run of the script (no CUDA profile)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    torch.manual_seed(0)
    encoder, tokenizer = load_encoder(RANDOM_BERT_BASE).to(device).eval(), load_tokenizer(RANDOM_BERT_BASE)
    ids = (encoder.config.vocab_size, tokenizer.cls_token_id, tokenizer.sep_token_id)
    generator = torch.Generator().manual_seed(0)
    query_ids = mores_speed.random_ids(generator, 1, 16, *ids)[0]
    query = mores_speed._query_inputs(query_ids, device)
    docs = mores_speed.random_ids(generator, args.candidates, args.length, *ids)
    batches = [range(len(docs))]
    result = {
        "label": args.label,
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "torch": torch.__version__,
        "rows": {},
    }
    bench = argparse.Namespace(query_len=16, lengths=[args.length], blocks=[args.blocks], batch_size=args.candidates)
    model = mores_speed._mores(encoder, tokenizer, args.blocks, bench).to(device).eval()
    torch.nn.init.normal_(model.head.weight)  # scores of a spread the equivalence check can compare (speed: the same)
    bert = mores_speed._bert_ranker(encoder, tokenizer, query_ids, docs, batches, args.length)
    with tempfile.TemporaryDirectory() as tmp:
        bench.precision = "fp32"
        stores, rows = mores_speed._stores(model, docs, Path(tmp) / "store", bench, device, {}, (args.length, 2))
        for precision in args.precisions:
            bench.precision = precision
            variants = mores_speed._mores_variants(
                model, args.blocks, query, docs, batches, stores, rows, bench, device
            )
            fns = {"bert": bert, **{label: fn for _, label, *_, fn in variants if label in ("s1", "s2")}}
            with torch.inference_mode(), autocast(device, precision):
                timings = time_alternating(fns, device, args.repeats, args.warmup)
                activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
                with profile(activities=activities) as prof:
                    for _ in range(3):
                        fns["s2"]()
                    if cuda:
                        torch.cuda.synchronize()
            table = prof.key_averages().table(
                sort_by="cuda_time_total" if cuda else "cpu_time_total", row_limit=14, max_name_column_width=50
            )
            print(f"--- {args.label} {precision}: Reuse-S2 profile (3 passes)\n{table}", flush=True)
            bert_s = timings["bert"].median_s
            result["rows"][precision] = {
                key: {
                    "median_s": t.median_s,
                    "min_s": min(t.seconds),
                    "max_s": max(t.seconds),
                    "speedup": bert_s / t.median_s,
                }
                for key, t in timings.items()
            }
            result["rows"][precision]["s2_profile"] = table
            print(
                f"{args.label} {precision}: BERT ranker {bert_s * 1e3:.1f} ms; "
                + "; ".join(
                    f"{k} {result['rows'][precision][k]['median_s'] * 1e3:.2f} ms -> {result['rows'][precision][k]['speedup']:.1f}x"
                    for k in ("s1", "s2")
                ),
                flush=True,
            )
            if cuda:
                result["rows"][precision]["s2_host"] = host_steps(
                    model, stores["s2"], rows["s2"], query, precision, device
                )
                print(f"{args.label} {precision}: Reuse-S2 host time per step {result['rows'][precision]['s2_host']}")
            if hasattr(model, "reads_rows"):
                result["rows"][precision]["equivalence"] = equivalence(model, stores, rows, query, precision, device)
                print(f"{args.label} {precision}: fused vs PyTorch path {result['rows'][precision]['equivalence']}")
    args.out.write_text(json.dumps(result, indent=1))


def host_steps(model, store, read, query, precision, device, passes: int = 20) -> dict:
    """Where a Reuse-S2 pass spends host time: the median ms each step takes to return (the GPU runs asynchronously,
    so a step's host time is the Python and launches in front of its kernels), and the pass's wall time with a sync
    at its end. Host time beyond the GPU's work is time the GPU waits."""
    half = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    resident = store.resident(device, half)
    dtype = half or torch.float32
    steps = {"query_module": [], "store_rows": [], "blocks": [], "wall": []}
    clock = time.perf_counter
    with torch.inference_mode(), autocast(device, precision):
        for i in range(passes + 2):
            torch.cuda.synchronize()
            t0 = clock()
            q = model.represent_queries(**query)
            t1 = clock()
            kv, mask = resident.doc_kv(read, model, device, dtype)
            t2 = clock()
            model.interact(q.expand(len(read), -1, -1), None, kv, mask)
            t3 = clock()
            torch.cuda.synchronize()
            t4 = clock()
            if i >= 2:
                for name, seconds in zip(steps, (t1 - t0, t2 - t1, t3 - t2, t4 - t0)):
                    steps[name].append(seconds)
    return {name: round(statistics.median(v) * 1e3, 3) for name, v in steps.items()}


def equivalence(model, stores, rows, query, precision, device) -> dict:
    """64 candidates scored through the fused path and through PyTorch's attention (``reads_rows`` off) in
    ``precision``, each against PyTorch's path in fp32: the largest difference as a share of the fp32 scores' spread."""
    out = {}
    half = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    for reuse in ("s1", "s2"):
        read = rows[reuse][:64]

        def score(store, fused, prec, dtype, read=read):
            with torch.inference_mode(), autocast(device, prec):
                q = model.represent_queries(**query).expand(len(read), -1, -1)
                mask = query["attention_mask"]  # None on CUDA: the query has no padding
                mask = None if mask is None else mask.expand(len(read), -1)
                if not fused:
                    model.reads_rows = lambda _device: False
                try:
                    return model.interact(q, mask, *store.doc_kv(read, model, device, dtype)).float()
                finally:
                    model.__dict__.pop("reads_rows", None)

        full = stores[reuse].resident(device)
        reference = score(full, False, "fp32", torch.float32)
        store = stores[reuse].resident(device, half) if half else full
        dtype = half or torch.float32
        spread = float(reference.std())
        out[reuse] = {
            "fused": float((score(store, True, precision, dtype) - reference).abs().max()) / spread,
            "pytorch": float((score(store, False, precision, dtype) - reference).abs().max()) / spread,
            "fp32_spread": spread,
        }
    return out


if __name__ == "__main__":
    main()
