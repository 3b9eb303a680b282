"""``longrank bench``: efficiency of one trained model, any type: documents scored per millisecond and peak
memory at given document lengths, and for models that pack windows (TKL) packed against unpacked.

How it measures (also written into the output's ``notes``):
- Inputs are real collection text: the collection's words in document order form one stream (tiled if the
  collection is shorter than needed), cut into ``batch_size`` documents of exactly ``length`` words, with
  synthetic ids (``bench-0``, ...: they are no collection document); queries are the collection's queries in
  id order. A model truncates to its ``max_doc_len``; the effective length
  is recorded, and the configured ``max_doc_len`` is always measured (it gives ``docs_per_ms``).
- Speed: forward only, under ``torch.no_grad``, after ``warmup`` untimed forwards; ``repeats`` (at least 5 by
  default) timed forwards, each bracketed by ``torch.cuda.synchronize`` on CUDA (``bench.timing``); the JSON keeps
  every pass's seconds with their median, min, max and quartiles (``outputs.Timing``), and docs/ms = batch_size /
  median ms. Tokenisation is not timed.
- Speed: all lengths are timed in one fresh process, alternating (200, 1000, 200, 1000, ...), so rows that score
  the same effective length (lengths beyond ``max_doc_len``) see the same machine and agree within their spread;
  timing each length in its own process let a GPU's clocks or a shared CPU's load differ between them.
- Memory: each length's memory runs in a fresh process of its own (``bench.fresh``: forked from a server that has
  only imported the code), over its first forward (so earlier
  lengths leave no cached memory behind; the first forward's one-time allocations count, as they do in reranking). On GPU: ``torch.cuda.max_memory_allocated`` during the forwards minus what was allocated before
  them (model and inputs), i.e. the forward's working memory. On CPU: peak resident set growth during the
  forwards: the kernel's RSS high-water mark is reset (``/proc/self/clear_refs``) after loading the model
  and building the batch, heap memory freed by loading is handed back first (``malloc_trim``; glibc's mmap
  threshold fixed at 64 KiB, so tensors are mapped and unmapped, not kept in the heap), and the reported
  value is ``VmHWM`` after the forwards minus ``VmRSS`` before them. Where ``clear_refs`` is not writable
  the process's lifetime ``ru_maxrss`` growth is used (a lower bound), and the notes say so.
- Packing (models with a ``pack_windows`` attribute): one batch of real text with lengths spread evenly
  up to ``max_doc_len`` (the padded batches of reranking), scored with packing on and off in the same
  process, timed alternately (packed, unpacked, packed, ...) so drifting machine load hits both alike: ms
  per batch, the speed-up, the windows each path feeds the Transformer, and the largest score difference.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gc
import json
import logging
from typing import Any

import torch

from longrank.data.corpus import Corpus
from longrank.data.words import tokenize
from longrank.errors import InputError
from longrank.bench import fresh
from longrank.bench.fresh import measure_in_fresh_process
from longrank.bench.memory import MemoryProbe
from longrank.bench.rows import LengthMeasurement
from longrank.bench.timing import MIN_REPEATS, check_repeats, median_of, time_alternating, time_region
from longrank.results.stage_outputs import BenchTable, Rate, Timing
from longrank.models.checkpoint import load_model
from longrank.config.model_types import MODEL_TYPES
from longrank.runtime import resolve_device
from longrank.config.schema import schema_default

log = logging.getLogger(__name__)
# Measures in fresh processes forked from a server that the CLI forks from this process (bench.fresh.start_here) after
# importing what fresh_preload names


def fresh_preload(args: argparse.Namespace) -> tuple[str, ...]:
    """What the measuring server imports (bench.fresh): torch alone for a word model, the encoders' modules too for a
    model on a pretrained encoder (and for a config this stage will refuse: ``run`` says why)."""
    try:
        kind = MODEL_TYPES.get(json.loads(args.model_config).get("type"))
    except (json.JSONDecodeError, AttributeError):
        kind = None
    return fresh.TORCH if kind is not None and not kind.on_pretrained_encoder else fresh.PRELOAD


MS_COLUMN = "ms/batch (median)"
COLUMNS = [
    "batch",
    "length asked (words)",
    "effective length (model units)",
    "docs/ms",
    MS_COLUMN,
    "peak memory (MB)",
    "window passes / batch",
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="the model's name (a key of config models:)")
    parser.add_argument("--model-config", required=True, help="the model's config entry as JSON")
    parser.add_argument("--checkpoint", required=True, help="trained weights (safetensors)")
    parser.add_argument("--data", required=True, help="results/{dataset}/data")
    parser.add_argument("--lengths", type=int, nargs="+", default=[200, 2000, 4000], help="document lengths in words")
    parser.add_argument("--batch-size", type=int, default=schema_default("bench.batch_size"))
    parser.add_argument(
        "--repeats", type=int, default=MIN_REPEATS, help="timed forwards per measurement (median and spread kept)"
    )
    parser.add_argument("--warmup", type=int, default=1, help="untimed forwards before the timed ones")
    parser.add_argument("--device", default=schema_default("device"))
    parser.add_argument("--out", required=True, help="output JSON")


def run(args: argparse.Namespace) -> None:
    job = _job(args)
    # Load once here: a checkpoint that does not fit the config fails now with the loader's clear message.
    model = load_model(args.checkpoint, job["model_cfg"], Corpus(args.data), "cpu")
    max_len = getattr(model, "max_doc_len", None)
    packs = hasattr(model, "pack_windows")
    del model
    lengths = sorted(set(args.lengths) | ({max_len} if max_len else set()))
    measured, rows, timings = _uniform(args, job, lengths)
    packing = _packing(args, job, max_len, rows, timings) if packs else None
    extra = {
        "batch_size": args.batch_size,
        "repeats": args.repeats,
        "warmup": args.warmup,
        "max_doc_len": max_len,
        "measurements": [m.to_json() for m in measured],
        **({"packing": packing} if packing else {}),
    }
    reference = _reference(measured, max_len)
    # a measurement that fitted in memory has both its docs/ms and its timed passes
    docs_per_ms = reference.docs_per_ms if reference is not None else None
    passes = reference.timed_passes if reference is not None else None
    BenchTable(
        title=f"Efficiency of {args.model}",
        columns=COLUMNS,
        rows=rows,
        notes=_notes(args, job["device"], measured, max_len, packing),
        docs_per_ms={args.model: docs_per_ms} if docs_per_ms is not None else {},
        # the timed passes behind docs_per_ms (batch_size documents each), so the report prints its range
        rates={args.model: Rate(args.batch_size, passes)} if passes is not None else {},
        device=job["device"],
        timings=timings,
        extra=extra,
    ).write(args.out)


def _job(args: argparse.Namespace) -> dict:
    """What every measuring process gets, the arguments checked."""
    if args.batch_size < 1 or any(n < 1 for n in args.lengths):
        raise InputError("--batch-size and every --lengths value must be positive integers")
    check_repeats(args.repeats, args.warmup)
    try:
        model_cfg = json.loads(args.model_config)
    except json.JSONDecodeError as err:
        raise InputError(f"--model-config is not JSON: {err}") from None
    return {
        "model_cfg": model_cfg,
        "checkpoint": args.checkpoint,
        "data": args.data,
        "device": str(resolve_device(args.device)),
        "batch_size": args.batch_size,
        "repeats": args.repeats,
        "warmup": args.warmup,
    }


def _uniform(args: argparse.Namespace, job: dict, lengths: list[int]) -> tuple[list[LengthMeasurement], list, list]:
    """Memory at each length in a fresh process each, then the speed of every length that fits, alternating in one."""
    rows, timings, measured = [], [], []
    for length in lengths:
        log.info("bench %s: memory at %d words x %d docs on %s", args.model, length, args.batch_size, job["device"])
        measured.append(LengthMeasurement.from_json(_in_fresh_process({**job, "kind": "memory", "length": length})))
    fitting = [m.length for m in measured if not m.oom]
    log.info("bench %s: speed at %s words, the lengths alternating", args.model, fitting)
    speeds = _in_fresh_process({**job, "kind": "speed", "lengths": fitting, "length": fitting}) if fitting else {}
    measured = [dataclasses.replace(m, **speeds.get(str(m.length), {})) for m in measured]
    for m in measured:
        rows.append(_row("uniform", m.length, m))
        timings.append(_timing_of(m))
    return measured, rows, timings


def _packing(args: argparse.Namespace, job: dict, max_len: int | None, rows: list, timings: list) -> dict:
    """A mixed-length batch with packed and unpacked windows (rows and timings appended)."""
    log.info("bench %s: mixed-length batch, packed and unpacked windows", args.model)
    result = _in_fresh_process({**job, "kind": "packing", "length": max_len})
    for mode in ("packed", "unpacked"):
        lengths = f"{result['min_length']}-{result['max_length']}"
        longest = result["max_length"]
        measured = LengthMeasurement.from_json({"length": longest, "effective_length": longest, **result[mode]})
        rows.append(_row(f"mixed lengths, {mode}", lengths, measured))
        timings.append(_timing_of(measured))
    return result


def _reference(measured: list[LengthMeasurement], max_len) -> LengthMeasurement | None:
    """The measurement that gives docs_per_ms: at the configured max_doc_len, else the longest that fitted."""
    reference = next((m for m in measured if max_len and m.length == max_len and not m.oom), None)
    if reference is None:
        usable = [m for m in measured if not m.oom]
        reference = max(usable, key=lambda m: m.effective_length) if usable else None
    return reference


def _notes(
    args: argparse.Namespace, device: str, measured: list[LengthMeasurement], max_len, packing: dict | None
) -> str:
    memory_method = measured[0].memory_method if measured else ""
    notes = (
        f"Device {device} ({measured[0].device_name if measured else ''}), {torch.get_num_threads()} CPU threads. "
        f"Forward only, no gradient, after {args.warmup} warm-up forward(s); {median_of(args.repeats, 'timed batches', 'timed batch')} "
        f"of {args.batch_size} documents cut from the collection's text. Peak memory: "
        f"{memory_method} Lengths beyond the model's max_doc_len ({max_len}) are truncated by the model; 'effective "
        f"length' is what it scored, in the model's unit (words for the word-embedding models, WordPiece tokens for "
        f"the encoders)."
    )
    if packing:
        notes += (
            f" Window packing on a mixed-length batch ({packing['min_length']}-{packing['max_length']} words): "
            f"{packing['packed']['window_passes']} windows packed vs {packing['unpacked']['window_passes']} unpacked, "
            f"speed-up x{packing['speedup']:.2f}, largest score difference {packing['max_score_diff']:.2e}."
        )
    return notes


def _timing_of(measured: LengthMeasurement) -> dict[str, Timing]:
    passes = measured.timed_passes
    return {MS_COLUMN: passes} if passes is not None else {}


def _row(label: str, asked, m: LengthMeasurement) -> list:
    if m.oom:
        return [label, asked, m.effective_length, None, "out of memory", None, None]
    return [label, asked, m.effective_length, m.docs_per_ms, m.ms_per_batch, m.peak_memory_mb, m.window_passes]


# ---- measurement in a fresh process -------------------------------------------------------------------------


def _in_fresh_process(job: dict) -> dict:
    outcome = measure_in_fresh_process("longrank.bench.bench", job)
    if outcome.result is None:
        raise RuntimeError(
            f"bench measurement {job['kind']} at length(s) {job['length']} failed:\n{outcome.error[-4000:]}"
        )
    return outcome.result


def measure(job: dict) -> dict:
    device = torch.device(job["device"])
    corpus = Corpus(job["data"])
    model = load_model(job["checkpoint"], job["model_cfg"], corpus, device)
    batch_size, length = job["batch_size"], job["length"]
    queries = bench_queries(corpus, batch_size)
    max_len = getattr(model, "max_doc_len", None)

    def uniform_batch(n_words: int) -> dict:
        docs = _documents(corpus, [n_words] * batch_size)
        return {k: v.to(device) for k, v in model.encode(queries, _synthetic_ids(docs), docs).items()}

    if job["kind"] == "memory":  # peak memory and window passes of the first forward, alone in this process
        result = {"length": length, "effective_length": min(length, max_len) if max_len else length}
        result.update(timed(model, uniform_batch(length), 1, 0, device))
        return result
    if job["kind"] == "speed":  # every length in this one process, alternating: rows at one effective length agree
        forwards = {str(n): functools.partial(model, **uniform_batch(n)) for n in job["lengths"]}
        try:
            with torch.no_grad():
                timings = time_alternating(forwards, device, job["repeats"], job["warmup"])
        except torch.cuda.OutOfMemoryError:
            return {n: {"oom": True} for n in forwards}
        return {
            n: {
                "ms_per_batch": 1000 * t.median_s,
                "docs_per_ms": batch_size / (1000 * t.median_s),
                "timing": t.to_json(),
            }
            for n, t in timings.items()
        }
    # packing: lengths spread evenly up to max_doc_len, both paths in this one process
    lengths = [max(1, round(length * (i + 1) / batch_size)) for i in range(batch_size)]
    docs = _documents(corpus, lengths)
    batch = {k: v.to(device) for k, v in model.encode(queries, _synthetic_ids(docs), docs).items()}
    result = {"min_length": min(lengths), "max_length": max(lengths)}
    scores = {}
    for mode, pack in (("packed", True), ("unpacked", False)):  # memory and window passes of each path (one pass)
        model.pack_windows = pack
        result[mode] = timed(model, batch, 1, 0, device)
        with torch.no_grad():
            scores[mode] = model(**batch).float().cpu()
    # Speed: the two paths alternate, so a machine whose load drifts slows both alike.
    with torch.no_grad():
        timings = time_alternating(
            {mode: _forward_with_packing(model, batch, pack) for mode, pack in (("packed", True), ("unpacked", False))},
            device,
            job["repeats"],
            job["warmup"],
        )
    for mode, timing in timings.items():
        ms = timing.median_s * 1000.0
        result[mode].update(ms_per_batch=ms, docs_per_ms=len(lengths) / ms, timing=timing.to_json())
    result["speedup"] = result["unpacked"]["ms_per_batch"] / result["packed"]["ms_per_batch"]
    result["max_score_diff"] = float((scores["packed"] - scores["unpacked"]).abs().max())
    return result


def _forward_with_packing(model, batch: dict, pack: bool):
    def forward():
        model.pack_windows = pack
        model(**batch)

    return forward


def timed(model, batch: dict, repeats: int, warmup: int, device: torch.device) -> dict:
    """Peak memory and ms per batch of ``model`` on ``batch`` (and the windows it ran, for a windowed model)."""
    cuda = device.type == "cuda"
    counts_windows = hasattr(model, "window_passes")
    gc.collect()
    memory = MemoryProbe(device)
    out: dict[str, Any] = {
        "device_name": torch.cuda.get_device_name(device) if cuda else "CPU",
        "memory_method": memory.method,
    }

    def forward():
        model(**batch)

    try:
        with torch.no_grad():
            for _ in range(warmup):
                forward()
            if counts_windows:
                model.window_passes = 0
            timing = time_region(forward, device, repeats, warmup=0)
    except torch.cuda.OutOfMemoryError:
        return {**out, "oom": True}
    ms = timing.median_s * 1000.0
    n_docs = next(iter(batch.values())).shape[0]
    out.update(ms_per_batch=ms, docs_per_ms=n_docs / ms, peak_memory_mb=memory.peak_mb(), timing=timing.to_json())
    if counts_windows:
        out["window_passes"] = model.window_passes // repeats
    return out


# ---- inputs from the collection's text ----------------------------------------------------------------------


def bench_queries(corpus: Corpus, n: int) -> list[str]:
    texts = [corpus.queries[q] for q in sorted(corpus.queries)]
    if not texts:
        raise InputError(f"{corpus.dir}/queries.tsv has no queries to benchmark with")
    return [texts[i % len(texts)] for i in range(n)]


def _synthetic_ids(docs: list[str]) -> list[str]:
    """Ids for the benchmark's documents, which are cut from the collection's word stream and are no
    collection document (a model that looks documents up by id finds none of them)."""
    return [f"bench-{i}" for i in range(len(docs))]


def _documents(corpus: Corpus, lengths: list[int]) -> list[str]:
    """Documents of exactly ``lengths`` words, consecutive slices of the collection's word stream (tiled)."""
    need = sum(lengths)
    stream: list[str] = []
    for doc_id in sorted(corpus.docs):
        stream.extend(tokenize(corpus.docs[doc_id]))
        if len(stream) >= need:
            break
    if not stream:
        raise InputError(f"{corpus.dir}/docs.jsonl has no words to benchmark with")
    while len(stream) < need:
        stream.extend(stream[: need - len(stream)])
    docs, at = [], 0
    for n in lengths:
        docs.append(" ".join(stream[at : at + n]))
        at += n
    return docs
