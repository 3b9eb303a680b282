"""Where one MORES Reuse-S2 pass spends its GPU time: the bench's own variant (``longrank mores_speed``'s
``s2`` row, resident store) over random BERT-base candidates, profiled by ``torch.profiler`` after warm-up.

    python benchmarks/mores_profile.py --precision fp32 --candidates 1000 --length 512 --blocks 2

prints the kernels by GPU time (docs/studies/speed.md reads the H100's: the matrix products, the attention and
the store's gather). On the CPU, with the default config's encoder:

    python benchmarks/mores_profile.py --device cpu --encoder minilm --candidates 32 --threads 2
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from longrank.bench import mores_speed
from longrank.models.modules.encoders import RANDOM_BERT_BASE, load_encoder, load_tokenizer
from longrank.precision import AUTOCAST_DTYPES, autocast


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--precision", choices=sorted(AUTOCAST_DTYPES), default="fp32")
    parser.add_argument("--candidates", type=int, default=1000)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--passes", type=int, default=3, help="profiled passes (after as many warm-up passes)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--encoder", default=RANDOM_BERT_BASE, help="an encoder name (default: BERT-base, random)")
    parser.add_argument("--threads", type=int, help="torch's CPU threads (default: torch's own choice)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    bench = argparse.Namespace(
        query_len=16, lengths=[args.length], blocks=[args.blocks], batch_size=args.candidates, precision=args.precision
    )
    device = torch.device(args.device)
    encoder, tokenizer = load_encoder(args.encoder).to(device).eval(), load_tokenizer(args.encoder)
    ids = (encoder.config.vocab_size, tokenizer.cls_token_id, tokenizer.sep_token_id)
    generator = torch.Generator().manual_seed(0)
    query = mores_speed._query_inputs(mores_speed.random_ids(generator, 1, 16, *ids)[0], device)
    docs = mores_speed.random_ids(generator, args.candidates, args.length, *ids)
    model = mores_speed._mores(encoder, tokenizer, args.blocks, bench).to(device).eval()
    with tempfile.TemporaryDirectory() as tmp:
        stores, rows = mores_speed._stores(model, docs, Path(tmp) / "store", bench, device, {}, (args.length, 2))
        variants = mores_speed._mores_variants(
            model, args.blocks, query, docs, [range(len(docs))], stores, rows, bench, device
        )
        reuse_s2 = next(fn for _, label, *_, fn in variants if label == "s2")
        with torch.inference_mode(), autocast(device, args.precision):
            for _ in range(args.passes):
                reuse_s2()
            _synchronize(device)
            with profile(
                activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
            ) as prof:
                for _ in range(args.passes):
                    reuse_s2()
                _synchronize(device)
    print(
        prof.key_averages().table(
            sort_by="cuda_time_total" if device.type == "cuda" else "cpu_time_total",
            row_limit=18,
            max_name_column_width=60,
        )
    )


if __name__ == "__main__":
    main()
