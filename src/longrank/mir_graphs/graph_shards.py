"""A graph set built in shards (``mir_graphs.<set>.shards`` above 1) and merged into the bytes one job writes.

``graphs --shard i/N`` builds the records of documents ``[i*D/N, (i+1)*D/N)`` of the collection's ``D`` in its order
(``annotate.shard_range``, the annotation's split) into a directory of its own, written whole or not at all
(``io.atomic.staged_directory``): its ``graphs.sqlite`` and ``settings.json`` as one job writes them for those
documents, its ``stats.json`` with its range (``shard``), and ``sizes.npz``, each record's construction time and node
and edge counts, from which the merge computes the set's statistics (a percentile of the whole is not one of the
shards' percentiles). Every shard fits the tf-idf weights of the p2p edges on the whole collection, as one job does:
a shard's records are the unsharded run's.

``graphs --merge DIR...`` checks that every shard is there and complete and was built with the merge's settings and
inputs (``complete_shard``), then copies the records as stored, in order, into a fresh database: ``graphs.sqlite``
and ``settings.json`` are byte-identical to one job's, ``stats.json`` equal but the timing (``seconds`` summed over the
shards, ``construction_seconds_per_document``)."""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from longrank.data.mir_graph_settings import GraphSetSettings
from longrank.data.records import GRAPHS, SETTINGS, Records, RecordWriter
from longrank.errors import InputError
from longrank.io.atomic import staged_directory
from longrank.io.json_yaml import read_json, write_json
from longrank.mir_graphs.annotate import shard_range

log = logging.getLogger(__name__)

SIZES = "sizes.npz"
VIEWS = ("passages", "sentences", "tokens")
EDGES = ("p2p", "s2s", "t2t")
# settings.json holds the set's settings and these, its tokenizer's (graphs._tokenizer_ids)
TOKENIZER_IDS = ("cls_id", "sep_id", "pad_id", "vocab_size")


@dataclass
class Sizes:
    """Per record, in document order: its construction time and its nodes per view and edges per graph."""

    seconds: list[float] = field(default_factory=list)
    counts: dict[str, list[int]] = field(default_factory=lambda: {key: [] for key in (*VIEWS, *EDGES)})

    def add(self, seconds: float, record: dict) -> None:
        self.seconds.append(seconds)
        for view in VIEWS:
            self.counts[view].append(len(record[view]))
        for view, edges in record["edges"].items():
            self.counts[view].append(len(edges))

    def save(self, path: Path) -> None:
        arrays = {"seconds": np.array(self.seconds, dtype=np.float64)}
        arrays |= {key: np.array(values) for key, values in self.counts.items()}
        np.savez(path, **arrays)  # type: ignore[arg-type]  # the stub takes a keyword for allow_pickle: bool

    @classmethod
    def load(cls, path: Path) -> Sizes:
        with np.load(path) as arrays:
            return cls(arrays["seconds"].tolist(), {key: arrays[key].tolist() for key in (*VIEWS, *EDGES)})

    def extend(self, other: Sizes) -> None:
        self.seconds += other.seconds
        for key, values in other.counts.items():
            self.counts[key] += values


def _summary(values: Sequence[float]) -> dict:
    return {
        "mean": float(np.mean(values)) if values else 0.0,
        "p90": float(np.percentile(values, 90)) if values else 0.0,
    }


def set_stats(sizes: Sizes, seconds: float, inputs: dict, prf_documents: int, s: GraphSetSettings) -> dict:
    """``stats.json`` of a graph set: one formula for one job, a shard and the merge of shards, so that the merge's
    equal one job's but for the timing. ``inputs``: the annotations' directory, their max_words, the PRF queries'."""
    n, counts = len(sizes.seconds), sizes.counts
    return {
        "documents": n,
        "seconds": seconds,
        **inputs,
        "prf_documents": prf_documents,
        "construction_seconds_per_document": {**_summary(sizes.seconds), "max": max(sizes.seconds, default=0.0)},
        "nodes": {view: _summary(counts[view]) for view in VIEWS},
        "edges": {view: _summary(counts[view]) for view in EDGES},
        # a capped count is below its cap exactly when the uncapped one is
        "under_cap": {
            "sentences": float(np.mean([c < s.max_sentence_nodes for c in counts["sentences"]])) if n else 1.0,
            "tokens": float(np.mean([c < s.max_token_nodes for c in counts["tokens"]])) if n else 1.0,
        },
    }


def shard_of(shard: int, shards: int, n_docs: int, pretrain_queries: str | None) -> dict:
    """What a shard's ``stats.json`` records of it (``shard``) and the merge checks: its place, its documents' range
    and the pseudo-query set it was built for pre-training on, if any. More shards than documents is refused: a shard
    of none is a job for nothing."""
    if shards > n_docs:
        raise InputError(
            f"config key mir_graphs.<set>.shards: {shards} shards for {n_docs} documents; expected at most the "
            "number of documents"
        )
    start, stop = shard_range(shard, shards, n_docs)
    return {"index": shard, "shards": shards, "start": start, "stop": stop, "pretrain_queries": pretrain_queries}


def complete_shard(directory: Path, expected: dict, inputs: dict, s: GraphSetSettings) -> tuple[dict, Sizes]:
    """The stats and sizes of the shard ``expected`` describes (``shard_of``) at ``directory`` if it holds every
    record of its range, built with the settings ``s`` from ``inputs``; else an error naming the shard."""
    shard, shards, n = expected["index"], expected["shards"], expected["stop"] - expected["start"]
    name = f"graphs: shard {shard} of {shards} ({directory})"
    rerun = f"run `longrank graphs --shard {shard}/{shards}` for it"
    if not all((directory / f).is_file() for f in ("stats.json", GRAPHS, SETTINGS, SIZES)):
        raise InputError(f"{name} is missing; {rerun}")
    stats = read_json(directory / "stats.json")
    records = len(Records(directory / GRAPHS, "graphs", "graph set shard", rerun))
    sizes = Sizes.load(directory / SIZES)
    if stats.get("shard") != expected or not stats.get("documents") == records == len(sizes.seconds) == n:
        raise InputError(
            f"{name} is incomplete: it holds {records} records, its stats {stats.get('documents')} of "
            f"{stats.get('shard')}; expected {n} records of {expected}; {rerun}"
        )
    built = {k: v for k, v in read_json(directory / SETTINGS).items() if k not in TOKENIZER_IDS}
    if built != s.to_json() or {k: stats.get(k) for k in inputs} != inputs:
        raise InputError(
            f"{name} was built with the settings {built} from { ({k: stats.get(k) for k in inputs}) }, expected "
            f"{s.to_json()} from {inputs}; {rerun}"
        )
    return stats, sizes


def merge(shard_dirs: list[Path], shards: list[dict], inputs: dict, s: GraphSetSettings, out: Path) -> dict:
    """The shards' records into one graph set at ``out``, as one job writes it (the module's doc); ``shards`` their
    ranges (``shard_of``), in order. Every shard is checked first: a partial one is never merged."""
    parts = [complete_shard(d, shard, inputs, s) for d, shard in zip(shard_dirs, shards, strict=True)]
    first = (shard_dirs[0] / SETTINGS).read_bytes()
    for i, directory in enumerate(shard_dirs):  # one tokenizer for the whole collection, as one job would read
        if (directory / SETTINGS).read_bytes() != first:
            raise InputError(
                f"graphs: shard {i} of {len(shards)} ({directory}) was cut by another tokenizer than shard 0: "
                f"{json.loads((directory / SETTINGS).read_bytes())} against {json.loads(first)}; "
                f"run `longrank graphs --shard {i}/{len(shards)}` for it again"
            )
    sizes = Sizes()
    for _, part in parts:
        sizes.extend(part)
    with staged_directory(out) as staging:
        with RecordWriter(staging / GRAPHS, "graphs") as writer:
            for directory in shard_dirs:
                for doc_id, text in Records(directory / GRAPHS, "graphs", "graph set shard", "").rows():
                    writer.add_text(doc_id, text)
        shutil.copyfile(shard_dirs[0] / SETTINGS, staging / SETTINGS)
        seconds = sum(stats["seconds"] for stats, _ in parts)
        stats = set_stats(sizes, seconds, inputs, sum(stats["prf_documents"] for stats, _ in parts), s)
        write_json(staging / "stats.json", stats)
    log.info("graphs: %d shards merged, %d documents", len(shard_dirs), stats["documents"])
    return stats
