"""An NDRM impact index (:mod:`longrank.models.ndrm_impact`, the ``impact_index`` fold artifact) built in shards
(``impact_index.shards`` above 1) and merged into the bytes one job writes.

``artifacts --shard i/N`` scores the query terms against one range of the collection's documents (the index's order:
sorted ids), cut at multiples of the batch (``--batch-size``): every document is scored in the batch it meets in one
job, so its scores are one job's to the last bit. A shard keeps what one job keeps of its documents (each term's top
``impact_depth``, or every score) with their global columns and each term's minimum over its documents, in
``rows.npz``, and then ``shard.json`` (its range, batch, the checkpoint's and the terms' sha256, the model's entry);
the artifacts stage writes its directory under a temporary name and renames it when whole.

``artifacts --merge DIR...`` checks every shard (there, complete, of its range, built from the merge's checkpoint
with its entry, terms and batch, naming the shard that is not), concatenates the rows in order, keeps each term's top
``impact_depth`` again (a stable sort: highest first, earlier documents first among ties, as one job's running cut
keeps them) and takes the minimum of the floors: ``impact.npz`` byte-identical to one job's, ``impact.json`` equal
but ``build_seconds`` (the shards' summed with the merge's).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np

from longrank.errors import InputError
from longrank.io.json_yaml import read_json, write_json
from longrank.models.ndrm_impact import impact_rows, query_term_table, save_impact_index

ROWS, SHARD = "rows.npz", "shard.json"
KEY = "config key impact_index.shards"


def shard_range(shard: int, shards: int, n_docs: int, batch_size: int) -> tuple[int, int]:
    """Shard ``shard`` of ``shards`` (from 0): documents ``[start, stop)`` of the index's order, whole batches of
    ``batch_size`` (the last shorter), ``[i*B/N, (i+1)*B/N)`` of the ``B`` batches."""
    batches = -(-n_docs // batch_size)
    return (
        min(n_docs, shard * batches // shards * batch_size),
        min(n_docs, (shard + 1) * batches // shards * batch_size),
    )


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def file_digest(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def write_shard(model, corpus, out_dir: Path, batch_size: int, shard: int, shards: int, origin: dict) -> dict:
    """Shard ``shard`` of ``shards`` of the impact index into ``out_dir`` (``origin``: the checkpoint's sha256 and the
    model's entry, which the merge checks)."""
    started, all_docs = time.perf_counter(), sorted(corpus.docs)
    batches = -(-len(all_docs) // batch_size)
    if shards > batches:
        raise InputError(
            f"{KEY}: {shards} shards for {len(all_docs)} documents, scored {batch_size} at a time ({batches} "
            f"ranges); expected at most {batches}"
        )
    start, stop = shard_range(shard, shards, len(all_docs), batch_size)
    _, terms = query_term_table(model, corpus)
    docs = all_docs[start:stop]
    values, columns, floors = impact_rows(model, terms, [corpus.docs[d] for d in docs], batch_size, docs)
    np.savez(Path(out_dir) / ROWS, values=values, columns=columns + start, floors=floors)
    record = {
        "shard": {"index": shard, "shards": shards, "start": start, "stop": stop, "batch_size": batch_size},
        "documents": len(docs),
        "terms": _digest(terms),
        "seconds": time.perf_counter() - started,
        **origin,
    }
    write_json(Path(out_dir) / SHARD, record)  # last: a shard with this file is whole
    return record


def _complete(directory: Path, shard: int, shards: int, expected: dict) -> tuple[dict, dict]:
    """Shard ``shard``'s record and rows if it holds its range, built as ``expected`` says; else an error naming it."""
    name, rerun = f"artifacts: shard {shard} of {shards} ({directory})", f"rerun `artifacts --shard {shard}/{shards}`"
    if not (directory / SHARD).is_file() or not (directory / ROWS).is_file():
        raise InputError(f"{name} is missing; {rerun}")
    record = read_json(directory / SHARD)
    with np.load(directory / ROWS) as stored:
        rows = {key: stored[key] for key in ("values", "columns", "floors")}
    span = expected["shard"]
    held = int(rows["floors"].shape[0]) == expected["n_terms"] and record["documents"] == span["stop"] - span["start"]
    if record["shard"] != span or not held:
        raise InputError(
            f"{name} is incomplete: it holds the range {record['shard']} ({record['documents']} documents) where "
            f"{span} is expected; {rerun}"
        )
    for key, what in (("checkpoint", "another checkpoint"), ("model", "another model entry"), ("terms", "other terms")):
        if record[key] != expected[key]:
            raise InputError(f"{name} was built from {what} than the merge's; {rerun}")
    return record, rows


def merge(model, corpus, shard_dirs: list[Path], out_dir: Path, batch_size: int, origin: dict) -> None:
    """The shards' rows, in order, written as one job's index into ``out_dir``."""
    started, all_docs = time.perf_counter(), sorted(corpus.docs)
    per_query, terms = query_term_table(model, corpus)
    shards, parts, seconds = len(shard_dirs), [], 0.0
    for i, directory in enumerate(shard_dirs):
        start, stop = shard_range(i, shards, len(all_docs), batch_size)
        span = {"index": i, "shards": shards, "start": start, "stop": stop, "batch_size": batch_size}
        expected = {"shard": span, "n_terms": len(terms), "terms": _digest(terms), **origin}
        record, rows = _complete(Path(directory), i, shards, expected)
        parts.append(rows)
        seconds += record["seconds"]
    values = np.concatenate([p["values"] for p in parts], axis=1)
    columns = np.concatenate([p["columns"] for p in parts], axis=1)
    floors = np.minimum.reduce([p["floors"] for p in parts])
    if model.impact_depth is not None:  # one job's running cut: highest first, earlier documents first among ties
        order = np.argsort(-values, axis=1, kind="stable")[:, : model.impact_depth]
        values, columns = np.take_along_axis(values, order, axis=1), np.take_along_axis(columns, order, axis=1)
    floors = np.where(np.isfinite(floors), floors, 0.0)
    seconds += time.perf_counter() - started
    save_impact_index(out_dir, terms, all_docs, (values, columns, floors), model.impact_depth, per_query, seconds)
