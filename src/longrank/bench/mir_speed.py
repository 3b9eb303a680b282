"""Stage ``mir_speed``: MIR's Fig. 5 -- throughput and peak memory of MIR and of BERT-MaxP over the same windows
(``window`` tokens every ``window·(1−overlap)``) at each document length, measured side by side in one process, and
the time to build a document's graph (precomputed once per collection, so reported apart).

Inputs are real text: whole documents of the collection joined in id order (their punctuation and case kept, so
spaCy finds sentences and entities) until each bench document has ``max(lengths)`` WordPiece tokens. Their graphs
are built here with the graph set's settings through the graphs stage's own code (spaCy annotation, then
``build_record``), without PRF words (those need the collection's pseudo-query runs): token pivots are entities
only, which leaves fewer T nodes than a PRF set gives, and the notes say so. Both models are built from the config
untrained (weights do not change the time). At each length MIR reads ``max_doc_tokens = length`` of the same
graphs and MaxP ``length`` tokens in the same windows; the two are timed alternately (MIR, MaxP, MIR, ...) so
drifting machine load hits both alike, and the median of ``repeats`` forwards counts. The ratio MIR/MaxP is of
throughput (documents per millisecond): above 1 MIR is faster. Peak memory as ``longrank bench`` measures it.
``docs_per_ms`` gives the throughput, for the report's effectiveness-vs-throughput plot, of every configured entry
this measurement stands for (:func:`longrank.bench.mir_alike.timed_alike`): the reference MIR entry and those with its architecture at other
lengths (Fig. 5's MIR-512 / 1K / 2K), each at its own ``max_doc_tokens``, and the BERT-MaxP entries over the same
windows at theirs. So the plot's MIR and MaxP points come from one side-by-side run (``side_by_side``: the report
takes them over a separate bench of the same entry).
"""

from __future__ import annotations

import argparse
import functools
import logging
import math
import statistics
import time
from dataclasses import dataclass, fields, replace

import torch

from longrank.bench.bench import bench_queries
from longrank.bench.memory import MemoryProbe
from longrank.bench.timing import median_of, synchronizer, time_alternating
from longrank.data.corpus import Corpus
from longrank.mir_graphs.annotate import annotation, cut_text, load_pipeline
from longrank.mir_graphs.annotate import settings as annotation_settings
from longrank.mir_graphs.graphs import build_record, fit_tfidf
from longrank.data.mir_graph_settings import GraphSetSettings, graph_settings
from longrank.errors import InputError
from longrank.io.json_yaml import json_object
from longrank.results.stage_outputs import BenchTable, Rate, TimedEntry, Timing
from longrank.models.bert_ranker import BertRanker
from longrank.models.modules.encoders import load_encoder, load_tokenizer
from longrank.config.model_types import architecture_defaults, architecture_params
from longrank.models.registry import build_model
from longrank.runtime import resolve_device
from longrank.config.schema import schema_default

log = logging.getLogger(__name__)

COLUMNS = [
    "document tokens",
    "passages",
    "MIR docs/s",
    "MaxP docs/s",
    "MIR / MaxP throughput",
    "MIR peak memory (MB)",
    "MaxP peak memory (MB)",
    "MIR ms/batch",
    "MaxP ms/batch",
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="the reference MIR entry's name")
    parser.add_argument("--model-config", required=True, help="its config entry as JSON")
    parser.add_argument("--graph-set", required=True, help="its graph set's settings as JSON")
    parser.add_argument("--annotations", default="{}", help="the annotations settings as JSON (max_words)")
    parser.add_argument(
        "--alike",
        default="{}",
        help="JSON {entry: {model: MIR | MaxP, tokens}}: the entries this "
        "measurement also gives docs_per_ms for (timed_alike)",
    )
    parser.add_argument(
        "--settings", default="{}", help="mir_speed settings as JSON: lengths, batch_size, repeats, documents"
    )
    parser.add_argument("--data", required=True, help="results/{dataset}/data")
    parser.add_argument("--device", default=schema_default("device"))
    parser.add_argument("--out", required=True, help="JSON table {title, columns, rows, notes, docs_per_ms}")


@dataclass(frozen=True)
class MirSpeedSettings:
    """``mir_speed``: the lengths timed, documents per batch, timed batches, and how many bench documents get graphs;
    the defaults the schema's (the one home of them)."""

    enabled: bool = schema_default("mir_speed.enabled")
    lengths: tuple[int, ...] = tuple(schema_default("mir_speed.lengths"))
    batch_size: int = schema_default("mir_speed.batch_size")
    repeats: int = schema_default("mir_speed.repeats")
    documents: int = schema_default("mir_speed.documents")

    @classmethod
    def from_json(cls, text: str) -> MirSpeedSettings:
        given = json_object(text, "--settings")
        unknown = set(given) - {f.name for f in fields(cls)}
        if unknown:
            raise InputError(f"mir_speed: unknown keys {sorted(unknown)}")
        settings = cls(**{**given, **({"lengths": tuple(given["lengths"])} if "lengths" in given else {})})
        if not settings.lengths or min(settings.lengths) < 1 or settings.batch_size < 1 or settings.repeats < 1:
            raise InputError("mir_speed: lengths, batch_size and repeats must be positive")
        return settings


def run(args: argparse.Namespace) -> None:
    settings = MirSpeedSettings.from_json(args.settings)
    result = measure(
        args.model,
        json_object(args.model_config, "--model-config"),
        graph_settings(json_object(args.graph_set, "--graph-set")),
        annotation_settings(json_object(args.annotations, "--annotations")).max_words,
        settings,
        Corpus(args.data),
        resolve_device(args.device),
        json_object(args.alike, "--alike"),
    )
    result.write(args.out)


def bench_documents(corpus: Corpus, tokenizer, n_docs: int, n_tokens: int) -> list[str]:
    """``n_docs`` texts of at least ``n_tokens`` WordPiece tokens, whole documents of the collection joined in id
    order (tiled when the collection is shorter)."""
    ids = sorted(corpus.docs)
    if not ids:
        raise InputError(f"{corpus.dir}/docs.jsonl has no documents to benchmark with")
    texts: list[str] = []
    current: list[str] = []
    count, at = 0, 0
    while len(texts) < n_docs:
        text = corpus.docs[ids[at % len(ids)]]
        at += 1
        current.append(text)
        count += len(tokenizer(text, add_special_tokens=False)["input_ids"])
        if count >= n_tokens:
            texts.append("\n".join(current))
            current, count = [], 0
        if at > 100 * len(ids) and not texts:
            raise InputError(f"{corpus.dir}/docs.jsonl holds too little text for {n_tokens}-token bench documents")
    return texts


def measure(
    name: str,
    model_cfg: dict,
    graph_set: GraphSetSettings,
    max_words: int,
    settings: MirSpeedSettings,
    corpus: Corpus,
    device,
    alike: dict | None = None,
) -> BenchTable:
    own = architecture_params(model_cfg).get("max_doc_tokens") or graph_set.max_doc_tokens
    entries = {
        n: TimedEntry.from_json(a, f"--alike {n}")
        for n, a in (alike or {name: {"model": "MIR", "tokens": own}}).items()
    }
    # the configured entries' own lengths give their docs/ms in the report
    lengths = sorted(set(settings.lengths) | {own} | {e.tokens for e in entries.values()})
    batch = settings.batch_size
    graphs = _bench_graphs(graph_set, max(lengths), max_words, max(batch, settings.documents), corpus)
    ids = list(graphs.records)[:batch]
    queries = bench_queries(corpus, batch)
    docs = graphs.texts[:batch]
    rows, by_length, timings = [], {}, []
    for length in lengths:
        models = _side_by_side(model_cfg, graph_set, graphs, length, corpus, device)
        inputs = {k: {n: t.to(device) for n, t in m.encode(queries, ids, docs).items()} for k, m in models.items()}
        timing = _alternate(models, inputs, settings.repeats, device)
        timings.append({f"{k} ms/batch": v.timing for k, v in timing.items()})
        by_length[length] = _length_stats(timing, batch, models["MaxP"].max_passages)
        rows.append(_row(length, by_length[length], timing))
        log.info(
            "mir_speed %d tokens: MIR %.4f docs/ms, MaxP %.4f docs/ms (ratio %.2f)",
            length,
            by_length[length]["mir_docs_per_ms"],
            by_length[length]["maxp_docs_per_ms"],
            by_length[length]["ratio"],
        )
        del models, inputs
    rates = {"MIR": "mir_docs_per_ms", "MaxP": "maxp_docs_per_ms"}
    return BenchTable(
        title=f"MIR against BERT-MaxP over the same windows ({name}; MIR Fig. 5)",
        columns=COLUMNS,
        rows=rows,
        notes=_notes(graphs, batch, settings.repeats, device),
        docs_per_ms={name: by_length[e.tokens][rates[e.model]] for name, e in entries.items()},
        # the passes behind each entry's docs/ms: the timing of its model at its length, batch documents a pass
        rates={
            name: Rate(batch, timings[lengths.index(e.tokens)][f"{e.model} ms/batch"]) for name, e in entries.items()
        },
        side_by_side=True,
        timed_entries=entries,
        device=str(device),
        timings=timings,
        extra={"by_length": by_length, "graph_ms_per_document": graphs.ms_per_document},
    )


@dataclass
class BenchGraphs:
    """The bench documents' texts and graph records (built here with the graph set's settings), the settings MIR reads
    them with, and the time one document's graph took to build."""

    texts: list[str]
    records: dict[str, dict]
    config: GraphSetSettings  # the graph set's settings at the bench's longest length
    meta: dict  # config and the tokenizer's ids, as a graph set's metadata
    tokenizer: object
    seconds: list[float]  # per document built

    @property
    def ms_per_document(self) -> float:
        return 1000 * statistics.median(self.seconds)


def _bench_graphs(
    graph_set: GraphSetSettings, longest: int, max_words: int, n_graphs: int, corpus: Corpus
) -> BenchGraphs:
    """``n_graphs`` bench documents of ``longest`` tokens and their graphs: spaCy annotation and the record, per
    document (the tf-idf fit is the collection's, apart). The bench builds its own graphs: the collection's
    max_doc_tokens does not cap them."""
    tokenizer = load_tokenizer(graph_set.encoder)
    texts = [cut_text(t, max(max_words, 2 * longest)) for t in bench_documents(corpus, tokenizer, n_graphs, longest)]
    graph_cfg = replace(graph_set, max_doc_tokens=longest)
    nlp = load_pipeline()
    vectorizer = fit_tfidf(texts)
    records, seconds = {}, []
    for i, text in enumerate(texts):
        start = time.perf_counter()
        records[f"bench-{i}"] = build_record(text, annotation(nlp(text)), [], tokenizer, graph_cfg, vectorizer)
        seconds.append(time.perf_counter() - start)
    meta = {
        **graph_cfg.to_json(),
        "cls_id": tokenizer.cls_token_id,
        "sep_id": tokenizer.sep_token_id,
        "pad_id": tokenizer.pad_token_id,
        "vocab_size": tokenizer.vocab_size,
    }
    return BenchGraphs(texts, records, graph_cfg, meta, tokenizer, seconds)


def _side_by_side(
    model_cfg: dict, graph_set: GraphSetSettings, graphs: BenchGraphs, length: int, corpus: Corpus, device
) -> dict:
    """MIR reading ``length`` tokens of the bench graphs, and BERT-MaxP over the same windows, untrained, in eval mode."""
    longest, step = graphs.config.max_doc_tokens, graphs.config.stride
    mir = build_model({**model_cfg, "max_doc_tokens": min(length, longest)}, corpus)
    mir.use_graphs(graphs.records, graphs.meta)
    passages = 1 + max(0, math.ceil((min(length, longest) - graphs.config.window) / step))
    maxp = BertRanker(
        load_encoder(graph_set.encoder),
        graphs.tokenizer,
        mode="maxp",
        passage_len=graphs.config.window,
        passage_stride=step,
        max_passages=passages,
        max_query_len={**architecture_defaults(model_cfg["type"]), **architecture_params(model_cfg)}["max_query_len"],
    )
    return {"MIR": mir.to(device).eval(), "MaxP": maxp.to(device).eval()}


def _length_stats(timing: dict[str, TimedModel], batch: int, passages: int) -> dict:
    mir_rate, maxp_rate = batch / timing["MIR"].ms, batch / timing["MaxP"].ms
    return {
        "mir_docs_per_ms": mir_rate,
        "maxp_docs_per_ms": maxp_rate,
        "ratio": mir_rate / maxp_rate,
        "passages": passages,
        **{f"{k}_peak_memory_mb": v.peak_mb for k, v in timing.items()},
    }


def _row(length: int, stats: dict, timing: dict[str, TimedModel]) -> list:
    """One row of COLUMNS: docs/s rather than docs/ms, readable at three digits."""
    return [
        length,
        stats["passages"],
        1000 * stats["mir_docs_per_ms"],
        1000 * stats["maxp_docs_per_ms"],
        stats["ratio"],
        timing["MIR"].peak_mb,
        timing["MaxP"].peak_mb,
        timing["MIR"].ms,
        timing["MaxP"].ms,
    ]


def _notes(graphs: BenchGraphs, batch: int, repeats: int, device) -> str:
    records = graphs.records.values()
    nodes = {
        view: statistics.mean(len(r[key]) for r in records)
        for view, key in (("passage", "passages"), ("sentence", "sentences"), ("token", "tokens"))
    }
    return (
        f"Device {device}, {torch.get_num_threads()} CPU threads, batches of {batch} documents cut from the "
        f"collection's text, forward only, after a warm-up forward each, {median_of(repeats, 'timed batches', 'timed batch')} "
        f"with MIR and MaxP alternating, synchronised on CUDA. MaxP "
        f"reads the same {graphs.config.window}-token windows every {graphs.config.stride} tokens. Graph "
        f"construction (spaCy annotation + pivots + graphs) took {graphs.ms_per_document:.1f} ms per document ("
        + (
            "one document, 1 run"
            if len(graphs.seconds) == 1
            else f"median of {len(graphs.seconds)} documents, {1000 * min(graphs.seconds):.1f}–"
            f"{1000 * max(graphs.seconds):.1f} ms"
        )
        + f"; {nodes['passage']:.1f} passage, {nodes['sentence']:.1f} sentence and "
        f"{nodes['token']:.1f} token nodes on average, entities only: PRF term pivots need the collection's "
        f"pseudo-query runs); it runs once per collection, not per query."
    )


@dataclass
class TimedModel:
    """One model's side of the side-by-side measurement at one length."""

    peak_mb: float  # during its warm-up forward, alone
    ms: float  # median ms per timed batch
    timing: Timing


def _alternate(models: dict, inputs: dict, repeats: int, device) -> dict[str, TimedModel]:
    """Each model's peak memory on its own (during its warm-up forward), then the models timed alternating."""
    peaks: dict[str, float] = {}
    with torch.no_grad():
        for key, model in models.items():
            probe = MemoryProbe(device)
            model(**inputs[key])
            synchronizer(device)()
            peaks[key] = probe.peak_mb()
        forwards = {key: functools.partial(model, **inputs[key]) for key, model in models.items()}
        timings = time_alternating(forwards, device, repeats, warmup=0)
    return {key: TimedModel(peaks[key], 1000 * timing.median_s, timing) for key, timing in timings.items()}
