"""Stage ``mores_speed``: MORES Table 4 -- time to rank 1,000 candidates for one query (query length 16, documents
of 128 and 512 tokens) for the BERT ranker and MORES 1x/2x IB with no reuse, Reuse-S1 and Reuse-S2,
measured side by side in one process, with the speed-up over the BERT ranker and, beside it, the FLOP ratio:
the BERT ranker's online operation count over the variant's. The ratio is a yardstick, not a ceiling: it counts
arithmetic only, so a measured speed-up can exceed it (the paper's own Table 4 speed-ups do in 8 of its 16 cells)
or fall short of it (reading a store, per-call overhead, small matrix products running below peak).

Runs at two sizes: the configured encoder (trained weights do not change the time, so no checkpoint is
needed) and BERT-base dimensions with random weights (the paper's n = 768, 12 layers). Inputs are random
WordPiece ids of exactly the stated lengths. On a CPU, 1,000 BERT-base pairs of 512 tokens take many
minutes, so ``--candidates`` of them are timed and the time is extrapolated linearly to ``--target``
(the notes say so). Reuse variants read a real memory-mapped store on disk holding those candidates.

FLOP model (multiply-adds x 2, per candidate, online only; n hidden, f FFN width, h heads, q / d lengths):
Transformer layer over L tokens = 2(4n^2 L + 2nL^2 + 2nfL); an Interaction Block = 2(n^2 q [cross Q] +
2n^2 d [cross K,V] + 2nqd [cross attention] + n^2 q [cross out] + 4n^2 q + 2nq^2 [query self-attention] +
2nfq [FFN]). BERT ranker: all layers over q + d tokens. MORES no reuse: the document module over d plus the IBs;
Reuse-S2: the IBs without the K,V projections (stored); Reuse-S1: the IBs with the cross-attention over the
stored states unprojected (``mores_interaction.attend_states``): 2n^2 q [queries into the states' space, W_k; the weighted
states out of it, W_v] + 2hqdn [scores and weighted states] in place of 2n^2 d + 2nqd where that is less. The query
module runs once per query and is shared by the candidates.
"""

from __future__ import annotations

import argparse
import copy
import logging
import tempfile
from pathlib import Path

import torch

from longrank.bench.rows import SpeedRow
from longrank.bench.timing import MIN_REPEATS, check_repeats, median_of, time_alternating
from longrank.results.stage_outputs import BenchTable, Timing
from longrank.models.modules.encoders import (
    DEFAULT_ENCODER,
    RANDOM_BERT_BASE,
    encoder_layers,
    load_encoder,
    load_tokenizer,
)
from longrank.models.mores import MORES
from longrank.models.mores_store import ReuseStore, token_inputs, write_store
from longrank.precision import AUTOCAST_DTYPES, autocast
from longrank.runtime import resolve_device
from longrank.config.schema import schema_default

log = logging.getLogger(__name__)

TIME_COLUMN = "Time (s / {target} cand.)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--encoder", default=DEFAULT_ENCODER, help="the configured encoder (a model's `encoder:` key)")
    parser.add_argument("--sizes", nargs="+", default=["configured", "bert-base"], choices=["configured", "bert-base"])
    parser.add_argument(
        "--lengths",
        nargs="+",
        type=int,
        default=schema_default("mores_speed.lengths"),
        help="document lengths in WordPiece tokens",
    )
    parser.add_argument("--query-len", type=int, default=16)
    parser.add_argument(
        "--blocks",
        nargs="+",
        type=int,
        default=schema_default("mores_speed.blocks"),
        help="MORES interaction blocks to time",
    )
    parser.add_argument("--candidates", type=int, default=32, help="candidates actually timed per variant")
    parser.add_argument(
        "--target", type=int, default=1000, help="candidates per query the table reports (extrapolated)"
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=schema_default("mores_speed.batch_size"),
        help="candidates per forward (on a GPU, 128 or more keeps it busy)",
    )
    parser.add_argument(
        "--repeats", type=int, default=MIN_REPEATS, help="timed passes over the candidates per variant (median kept)"
    )
    parser.add_argument("--warmup", type=int, default=1, help="untimed passes per variant before the timed ones")
    parser.add_argument(
        "--precision",
        choices=sorted(AUTOCAST_DTYPES),
        default=schema_default("rerank.precision"),
        help="every variant (the BERT ranker too) under this autocast; on a GPU the resident store is held in it",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch threads (0: leave torch's default; on a shared machine 1 is steadier)",
    )
    parser.add_argument("--device", default="cpu", help="cpu, cuda[:N] or auto (the paper reports both CPU and GPU)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="JSON table {title, columns, rows, notes}")


# --- operation counts ---------------------------------------------------------------------------------
def layer_flops(length: int, n: int, f: int) -> float:
    return 2.0 * (4 * n * n * length + 2 * n * length * length + 2 * n * f * length)


def ib_flops(q: int, d: int, n: int, f: int, heads: int, documents: str) -> float:
    """One Interaction Block per candidate; ``documents``: what it attends over: ``states`` projected online (no
    reuse), ``stored states`` unprojected (Reuse-S1), ``stored keys and values`` (Reuse-S2)."""
    projected = 2 * n * n * d + 2 * n * q * d
    cross = {
        "states": projected,
        "stored states": min(2 * n * n * q + 2 * heads * q * d * n, projected),  # as carrying_queries_pays
        "stored keys and values": 2 * n * q * d,
    }[documents]
    return 2.0 * (n * n * q + cross + n * n * q + 4 * n * n * q + 2 * n * q * q + 2 * n * f * q)


def online_flops(
    variant: str, blocks: int, q: int, d: int, layers: int, n: int, f: int, heads: int, max_pos: int, target: int
) -> float:
    if variant == "bert":
        return layers * layer_flops(min(q + d, max_pos), n, f)
    query_once = (layers - blocks) * layer_flops(q, n, f) / target
    doc_module = layers * layer_flops(d, n, f) if variant == "none" else 0.0
    documents = {"none": "states", "s1": "stored states", "s2": "stored keys and values"}[variant]
    return doc_module + query_once + blocks * ib_flops(q, d, n, f, heads, documents)


def random_ids(generator, n: int, length: int, vocab: int, cls_id: int, sep_id: int) -> list[list[int]]:
    body = torch.randint(1000, vocab, (n, max(length - 2, 0)), generator=generator)  # ordinary WordPiece ids
    return [[cls_id, *row.tolist(), sep_id] for row in body]


def bench_size(
    encoder, tokenizer, size: str, args, store_dir: Path, device: torch.device
) -> tuple[list[SpeedRow], dict]:
    """Every variant at every length for one encoder size: rows of the speed table, and the size's dimensions."""
    cfg = encoder.config
    n, f, layers = cfg.hidden_size, cfg.intermediate_size, len(encoder_layers(encoder))
    g = torch.Generator().manual_seed(args.seed)
    query_ids = random_ids(g, 1, args.query_len, cfg.vocab_size, tokenizer.cls_token_id, tokenizer.sep_token_id)[0]
    query = _query_inputs(query_ids, device)
    encoder = encoder.to(device).eval()
    moreses = {k: _mores(encoder, tokenizer, k, args).to(device).eval() for k in args.blocks}
    rows = []
    for d in args.lengths:
        docs = random_ids(g, args.candidates, d, cfg.vocab_size, tokenizer.cls_token_id, tokenizer.sep_token_id)
        batches = [range(s, min(s + args.batch_size, len(docs))) for s in range(0, len(docs), args.batch_size)]
        variants = [("BERT ranker", "-", None, "bert", _bert_ranker(encoder, tokenizer, query_ids, docs, batches, d))]
        spaces: dict[tuple, float] = {}
        for k, model in moreses.items():
            stores, store_rows = _stores(model, docs, store_dir / f"{size}-{d}-{k}ib", args, device, spaces, (d, k))
            variants += _mores_variants(model, k, query, docs, batches, stores, store_rows, args, device)
        # The query module alone, per model: a MORES pass runs it once per query, and only the rest of the pass
        # scales with the candidates when the time is extrapolated to --target (as the FLOP count amortises it).
        query_passes = {f"query{k}": lambda m=model: m.represent_queries(**query) for k, model in moreses.items()}
        # Warm-up (allocator, page cache, kernels), then the variants timed in turn: a drifting load slows all alike.
        with torch.inference_mode(), autocast(device, args.precision):
            timings = time_alternating(
                {**{str(i): fn for i, (*_, fn) in enumerate(variants)}, **query_passes},
                device,
                args.repeats,
                args.warmup,
            )
        dims = (layers, n, f, cfg.num_attention_heads, cfg.max_position_embeddings)
        rows += [
            _row(
                size,
                d,
                variant,
                timings[str(i)],
                timings["0"],
                timings.get(f"query{variant[2]}"),
                len(docs),
                dims,
                spaces,
                args,
            )
            for i, variant in enumerate(variants)
        ]
    return rows, {"hidden": n, "layers": layers, "ffn": f, "max_positions": cfg.max_position_embeddings}


def _query_inputs(query_ids: list[int], device: torch.device) -> dict:
    query = {
        "input_ids": torch.tensor([query_ids]),
        "attention_mask": torch.ones(1, len(query_ids), dtype=torch.long),
        "token_type_ids": torch.zeros(1, len(query_ids), dtype=torch.long),
    }
    return MORES.device_query_inputs(query, device)  # as score_pairs passes them (on CUDA: no all-ones mask)


def _mores(encoder, tokenizer, blocks: int, args) -> MORES:
    return MORES(
        copy.deepcopy(encoder),
        tokenizer,
        interaction_blocks=blocks,
        max_query_len=args.query_len - 2,
        max_doc_len=max(args.lengths) - 2,
    )


def _bert_ranker(encoder, tokenizer, query_ids: list[int], docs: list[list[int]], batches, d: int):
    """One pass of the BERT ranker over the candidates: [CLS] q [SEP] doc [SEP] through the whole encoder."""
    device = next(encoder.parameters()).device
    pair_len = min(len(query_ids) + d, encoder.config.max_position_embeddings)
    pairs = [(query_ids + doc[1:])[: pair_len - 1] + [tokenizer.sep_token_id] for doc in docs]

    def bert_ranker():
        for b in batches:
            ids = torch.tensor([pairs[i] for i in b], device=device)
            types = torch.zeros_like(ids)
            types[:, len(query_ids) :] = 1
            states = encoder(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=types).last_hidden_state
            states[:, 0].sum()  # the score head is one dot product: negligible

    return bert_ranker


def _stores(model, docs, prefix: Path, args, device, spaces: dict, key: tuple) -> tuple[dict, dict]:
    """Reuse-S1/S2 stores of the candidates, and their store rows (ids to rows once, as a prefetching reader would);
    ``spaces[(*key, reuse)]`` gets each store's MB per document."""
    doc_ids = [f"d{i}" for i in range(len(docs))]
    stores, store_rows = {}, {}
    for reuse in ("s1", "s2"):
        path = prefix.with_name(f"{prefix.name}-{reuse}.json")
        meta = write_store(model, doc_ids, docs, path, reuse, batch_size=args.batch_size, device=device)
        stores[reuse] = ReuseStore.open(path)
        store_rows[reuse] = stores[reuse].rows_of(doc_ids)
        spaces[(*key, reuse)] = meta["mb_per_document_at"].get(str(key[0]), meta["mb_per_document_mean"])
    return stores, store_rows


def _mores_variants(model, k: int, query: dict, docs, batches, stores, store_rows, args, device) -> list[tuple]:
    """MORES with k blocks, reading nothing (documents encoded online), Reuse-S1 and Reuse-S2; on a GPU the stores
    resident on it (the paper's setting) and the same read through host memory."""
    kv_dtype = AUTOCAST_DTYPES[args.precision] or torch.float32
    pad_id = model.tokenizer.pad_token_id

    def mores(store=None, read=None):
        q_rep = model.represent_queries(**query)  # once per query
        for b in batches:
            if store is None:
                batch = token_inputs([docs[i] for i in b], pad_id, model.doc_segment_id)
                inputs = {name: v.to(device) for name, v in batch.items()}
                doc, mask = model.represent_docs(**inputs), inputs["attention_mask"]
                kv = model.project_rows(doc, mask) if model.reads_rows(device) else model.project_docs(doc)
            else:
                kv, mask = store.doc_kv(read[b.start : b.stop], model, device, kv_dtype)
            query_mask = query["attention_mask"]
            query_mask = None if query_mask is None else query_mask.expand(len(b), -1)
            model.interact(q_rep.expand(len(b), -1, -1), query_mask, kv, mask)

    reads = [("none", "none", None), ("s1", "s1", stores["s1"]), ("s2", "s2", stores["s2"])]
    if device.type == "cuda":
        half = AUTOCAST_DTYPES[args.precision]
        reads = (
            [reads[0]]
            + [(r, r, stores[r].resident(device, half)) for r in ("s1", "s2")]
            + [(f"{r} via host", r, stores[r]) for r in ("s1", "s2")]
        )
    return [
        (f"MORES {k}xIB", label, k, reuse, lambda s=store, r=store_rows.get(reuse): mores(s, r))  # noqa: B008 (binds this row's)
        for label, reuse, store in reads
    ]


def _row(
    size: str, d: int, variant: tuple, timing, bert_timing, query_timing, n_docs: int, dims: tuple, spaces: dict, args
) -> SpeedRow:
    """One row of the speed table: time per target candidates, speed-up over the BERT ranker and the FLOP ratio.
    A MORES pass over ``n_docs`` candidates runs the query module once; extrapolated to ``--target`` candidates, it
    still runs once (``query_timing``), and only the rest of the pass scales."""
    name, reuse, k, kind, _ = variant
    layers, n, f, heads, max_pos = dims
    once = min(query_timing.median_s, timing.median_s) if query_timing is not None else 0.0
    per_cand = (once / args.target) + (timing.median_s - once) / n_docs
    bert_time = bert_timing.median_s / n_docs
    flops = online_flops(kind, k or 0, args.query_len, d, layers, n, f, heads, max_pos, args.target)
    bert_flops = online_flops("bert", 0, args.query_len, d, layers, n, f, heads, max_pos, args.target)
    log.info(
        "%s d=%d %s %s: %.3fs per %d candidates (x%.1f; FLOP ratio x%.1f)",
        *(size, d, name, reuse, per_cand * args.target, args.target, bert_time / per_cand, bert_flops / flops),
    )
    return SpeedRow(
        size=size,
        hidden=n,
        layers=layers,
        doc_len=d,
        model=name,
        reuse=reuse,
        time_s=per_cand * args.target,
        speedup=bert_time / per_cand,
        flop_ratio=bert_flops / flops,
        gflops_per_doc=flops / 1e9,
        space_mb_per_doc=0.0 if kind in ("bert", "none") else spaces[(d, k, kind)],
        timed_candidates=n_docs,
        timing=timing.to_json(),
        query_module_s=once,
    )


def run(args) -> None:
    check_repeats(args.repeats, args.warmup)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = resolve_device(args.device)
    rows, shapes = [], {}
    with tempfile.TemporaryDirectory(prefix="mores-speed-") as tmp:
        for size in args.sizes:
            name = args.encoder if size == "configured" else RANDOM_BERT_BASE
            size_rows, shapes[size] = bench_size(
                load_encoder(name), load_tokenizer(name), size, args, Path(tmp), device
            )
            rows += size_rows
    columns = _columns(args.target)
    notes = _notes(args, device, shapes)
    # The report renders every bench JSON as {title, columns, rows, notes}; the raw measurements stay beside.
    table = [
        [format(getattr(r, c["key"]), c["format"]) if "format" in c else str(getattr(r, c["key"])) for c in columns]
        for r in rows
    ]
    BenchTable(
        title="MORES ranking speed (Table 4)",
        columns=[c["label"] for c in columns],
        rows=table,
        notes=" ".join(notes),
        device=str(device),
        timings=[{TIME_COLUMN.format(target=args.target): Timing.from_json(r.timing)} for r in rows],
        extra={"measurements": [r.to_json() for r in rows]},
    ).write(args.out)


def _columns(target: int) -> list[dict]:
    """The speed table's columns: the row key, the label, the number format."""
    return [
        {"key": "size", "label": "Encoder"},
        {"key": "doc_len", "label": "Len"},
        {"key": "model", "label": "Model"},
        {"key": "reuse", "label": "Reuse"},
        {"key": "time_s", "label": TIME_COLUMN.format(target=target), "format": ".3g"},
        {"key": "speedup", "label": "Speed-up", "format": ".1f"},
        {"key": "flop_ratio", "label": "FLOP ratio", "format": ".1f"},
        {"key": "space_mb_per_doc", "label": "Space (MB/doc)", "format": ".2f"},
    ]


def _notes(args, device: torch.device, shapes: dict) -> list[str]:
    """What the table measured and how, one sentence each."""
    return [
        f"Time to rank {args.target} candidates for one query of {args.query_len} tokens; {args.candidates} candidates were "
        f"timed per variant and the time extrapolated linearly to {args.target}, the query module's once-per-query "
        f"time (timed alone) counted once ({median_of(args.repeats, 'passes', 'pass')} after "
        f"{args.warmup} warm-up pass(es), the variants alternating; batch {args.batch_size}, "
        f"{torch.get_num_threads()} torch threads, device {device}).",
        "Speed-up: BERT ranker time / variant time, measured in the same process. FLOP ratio: the same ratio of online "
        "floating-point operations (module docstring), a yardstick rather than a ceiling: a speed-up can exceed it "
        "(the paper's Table 4 does in 8 of its 16 cells), since time also goes to memory traffic and per-call overhead.",
        f"BERT ranker pairs are [CLS] q [SEP] d [SEP] cut to the encoder's {max(s['max_positions'] for s in shapes.values())} positions "
        "(at 512 document tokens it sees 512 - 16 of them, as a 512-token BERT ranker does).",
        "Reuse-S1/S2 read the candidates from a memory-mapped store on local disk (page cache warm after the first pass); "
        "the query module runs once per query and is included.",
        *(
            [
                "On the GPU, 's1'/'s2' hold the store in GPU memory, as the paper's GPU timing does (it prefetches documents to "
                "the GPU on a separate CUDA stream); 'via host' rows copy each batch from the memory-mapped store, so they also "
                "time the host-to-GPU copy of Space x candidates."
            ]
            if device.type == "cuda"
            else []
        ),
        "'configured' uses the configured encoder "
        + repr(args.encoder)
        + f" ({shapes.get('configured', {}).get('hidden', '?')} hidden, "
        f"{shapes.get('configured', {}).get('layers', '?')} layers); 'bert-base' has BERT-base dimensions with random weights "
        "(speed does not depend on the weights).",
        f"Precision {args.precision} (torch.autocast over every variant, the BERT ranker too"
        + ("; the GPU-resident stores held in it, halving their memory)." if args.precision != "fp32" else ")."),
        "Space: float32 per document of exactly Len tokens (on disk). The paper's Table 4 Reuse-S2 sizes are 4xK times its S1 sizes "
        "although its text says 2K projected copies are stored; we store exactly 2K (key and value per IB).",
    ]
