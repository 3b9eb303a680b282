"""Where MORES Reuse-S2 loses to its FLOP ratio on the CPU: the cross-attention of 16 query tokens over a candidate's
512 stored keys against the blocks' linear layers, at the default config's MiniLM dimensions (384 hidden, 12 heads).

    python benchmarks/mores_cpu_attention.py --threads 2 --out benchmarks/cpu-2core/mores_cpu_attention.json

Times, alternating (``longrank.bench.timing``), over one block of 32 candidates as the model runs it:

- ``attend_rows``: the model's own CPU path (``doc_attention._attend_each``: one SDPA per candidate over views of its
  rows in a store-sized table);
- the same 32 attentions over one candidate's rows, which stay in cache (the arithmetic without the memory);
- reading the 32 candidates' keys and values (a sum over their columns: the memory without the arithmetic);
- the alternatives: the rows gathered into one tensor (``DocRows.dense``, the path section 6.1 replaced; or only the
  block's keys and values into a buffer reused from call to call), then one batched SDPA;
- the block's linear layers over its 32 x 16 query rows (cross-attention output, Q/K/V and output of the
  self-attention, the FFN: what the BERT ranker's rate applies to).

Each line gives the median (min-max) and the rate: GFLOP/s for the arithmetic, GB/s for the read. docs/studies/speed.md
(section 12) reads it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import torch.nn.functional as F

from longrank.bench.timing import time_alternating
from longrank.models.modules.doc_attention import DocRows, attend_rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--candidates", type=int, default=32)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--hidden", type=int, default=384)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--query-len", type=int, default=16)
    parser.add_argument(
        "--store-docs", type=int, default=400, help="documents in the table the candidates are read from"
    )
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    b, n, h, m = args.candidates, args.length, args.hidden, args.query_len
    generator = torch.Generator().manual_seed(0)
    # a Reuse-S2 store of 2 blocks: per token row, block 0's keys and values, then block 1's
    table = torch.randn(args.store_docs * n, 4 * h, generator=generator)
    picked = torch.randperm(args.store_docs, generator=generator)[:b]
    docs = DocRows(table, picked * n, torch.full((b,), n, dtype=torch.int32), [0, 2 * h], [h, 3 * h], h, n)
    cached = DocRows(table, torch.zeros(b, dtype=torch.int64), docs.lengths, docs.key_cols, docs.value_cols, h, n)
    query = torch.randn(b, m, h, generator=generator)
    heads = args.heads
    split = lambda t: t.view(t.shape[0], t.shape[1], heads, -1).transpose(1, 2)  # noqa: E731

    def dense():
        keys, values, _ = docs.dense(0)  # equal lengths here: no mask needed
        return F.scaled_dot_product_attention(split(query), split(keys), split(values))

    buffer = torch.empty(b * n, 2 * h)
    token_rows = (docs.starts[:, None] + torch.arange(n)[None, :]).reshape(-1)

    def into_buffer():  # only the block's keys and values, into memory already paged in
        torch.index_select(table[:, : 2 * h], 0, token_rows, out=buffer)
        keys, values = buffer.view(b, n, 2 * h).split(h, dim=-1)
        return F.scaled_dot_product_attention(split(query), split(keys), split(values))

    rows = torch.randn(b * m, h, generator=generator)
    wide = torch.randn(b * m, 4 * h, generator=generator)
    square, up, down = (torch.randn(o, i, generator=generator) for o, i in [(h, h), (4 * h, h), (h, 4 * h)])

    def linears():
        for _ in range(5):  # cross-attention output, the self-attention's Q, K, V and output
            F.linear(rows, square)
        F.linear(rows, up)
        F.linear(wide, down)

    timings = time_alternating(
        {
            "attend_rows": lambda: attend_rows(query, docs, 0, heads),
            "attend_rows, one cached candidate": lambda: attend_rows(query, cached, 0, heads),
            "read keys and values": lambda: [table[s : s + n, : 2 * h].sum() for s in docs.starts.tolist()],
            "DocRows.dense + one batched SDPA": dense,
            "into a reused buffer + one batched SDPA": into_buffer,
            "linear layers": linears,
        },
        "cpu",
        args.repeats,
    )
    attention_flop = 2 * 2 * b * m * n * h  # scores and weighted values
    linear_flop = 2 * b * m * h * h * 5 + 2 * 2 * b * m * h * 4 * h
    read_bytes = b * n * 2 * h * table.element_size()
    rates = {
        "attend_rows": attention_flop / 1e9,
        "attend_rows, one cached candidate": attention_flop / 1e9,
        "read keys and values": read_bytes / 1e9,
        "DocRows.dense + one batched SDPA": attention_flop / 1e9,
        "into a reused buffer + one batched SDPA": attention_flop / 1e9,
        "linear layers": linear_flop / 1e9,
    }
    rows_out = []
    for name, timing in timings.items():
        unit = "GB/s" if name.startswith("read") else "GFLOP/s"
        rate = rates[name] / timing.median_s
        print(
            f"{name:40s} {timing.median_s * 1e3:7.2f} ms ({timing.min_s * 1e3:.2f}-{timing.max_s * 1e3:.2f})"
            f"  {rate:6.1f} {unit}"
        )
        rows_out.append({"name": name, "rate": rate, "unit": unit, "timing": timing.to_json()})
    if args.out:
        args.out.write_text(json.dumps({"settings": vars(args) | {"out": str(args.out)}, "rows": rows_out}, indent=1))


if __name__ == "__main__":
    main()
