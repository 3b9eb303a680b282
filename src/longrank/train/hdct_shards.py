"""Stage ``hdct`` spread over shards (``first_stages[].shards`` above 1 for a first stage of method hdct), merged into
what one job writes.

One job trains HDCT's encoder, weights every passage of every document through it and indexes the pseudo-documents
(:func:`longrank.train.hdct_build.build`). With N shards the same work is three kinds of job:

- ``hdct --train-encoder``: the encoder trained as one job trains it (the same seed, examples and steps), its weights
  and ``training.json`` (the passages it drew from, its seconds and loss curve, its settings) written whole or not at
  all (``io.atomic.staged_directory``).
- ``hdct --shard i/N --encoder DIR``: the pseudo term frequencies of one range of the collection's documents in its
  order, weighted by that encoder. The ranges are cut at multiples of ``hdct.CHUNK`` (the documents whose passages one
  job batches together): every passage meets the batch it meets in one job, so its weights are one job's to the last
  bit. More shards than chunks (so than documents) is refused naming the key. A shard writes ``frequencies.jsonl``
  (one ``[doc_id, [[term, tf], ...]]`` a line) and then ``shard.json`` (its range, settings, the encoder's weights'
  sha256), the whole directory renamed into place when written.
- ``hdct --merge DIR... --encoder DIR``: every shard checked (there, complete, of its range, weighted with the merge's
  settings by the merge's encoder, naming the shard that is not), the frequencies concatenated in order, the bm25s
  index built as one job builds it: ``model.safetensors`` and ``index/`` byte-identical to one job's, ``stats.json``
  equal but the timing (``weight_seconds`` summed over the shards).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import shutil
import time
from collections import Counter
from pathlib import Path

from longrank.data.corpus import Corpus
from longrank.errors import InputError
from longrank.io.atomic import staged_directory
from longrank.io.json_yaml import read_json, write_json
from longrank.models.checkpoint import save_weights
from longrank.models.hdct_encoder import WEIGHTS, load_model
from longrank.retrieval.first_stage import HDCTSettings
from longrank.runtime import resolve_device
from longrank.train import hdct_build as hdct

log = logging.getLogger(__name__)

TRAINING, FREQUENCIES, SHARD = "training.json", "frequencies.jsonl", "shard.json"


def _key(entry: dict) -> str:
    return f"config key first_stages.{entry.get('name', 'hdct')}.shards"


def train_only(
    entry: dict, corpus: Corpus, out: Path, titles: dict[str, str] | None, pseudo_dir: Path | None, device: str
) -> dict:
    """The encoder as one job trains it, into ``out``: its weights and ``training.json``."""
    spec = hdct.settings(entry)
    torch_device = resolve_device(device)
    model, training = hdct.train_encoder(spec, corpus, titles, pseudo_dir, torch_device)
    record = {**training, "device": str(torch_device), "settings": dataclasses.asdict(spec)}
    with staged_directory(out) as staging:
        save_weights(model, staging / WEIGHTS)
        write_json(staging / TRAINING, record)
    return record


def shard_range(shard: int, shards: int, n_docs: int) -> tuple[int, int]:
    """Shard ``shard`` of ``shards`` (from 0): documents ``[start, stop)`` of the collection's order, whole chunks of
    ``hdct.CHUNK`` documents (the last chunk shorter), ``[i*C/N, (i+1)*C/N)`` of the ``C`` chunks."""
    chunks = -(-n_docs // hdct.CHUNK)
    return (
        min(n_docs, shard * chunks // shards * hdct.CHUNK),
        min(n_docs, (shard + 1) * chunks // shards * hdct.CHUNK),
    )


def _weights_digest(encoder: Path) -> str:
    return hashlib.sha256((encoder / WEIGHTS).read_bytes()).hexdigest()


def _trained(encoder: Path, spec: HDCTSettings) -> dict:
    """The encoder job's record, if it was trained with these settings."""
    if not (encoder / TRAINING).is_file() or not (encoder / WEIGHTS).is_file():
        raise InputError(f"hdct: {encoder} holds no trained encoder; run `longrank hdct --train-encoder` for it")
    record = read_json(encoder / TRAINING)
    if record["settings"] != json.loads(json.dumps(dataclasses.asdict(spec))):
        raise InputError(f"hdct: the encoder in {encoder} was trained with other settings than these; retrain it")
    return record


def weigh_shard(entry: dict, corpus: Corpus, encoder: Path, shard: int, shards: int, out: Path, device: str) -> dict:
    """Shard ``shard`` of ``shards``: its documents' pseudo term frequencies, weighted by ``encoder``, into ``out``."""
    spec, n_docs = hdct.settings(entry), len(corpus.docs)
    chunks = -(-n_docs // hdct.CHUNK)
    if shards > chunks:
        raise InputError(
            f"{_key(entry)}: {shards} shards for {n_docs} documents, weighted {hdct.CHUNK} at a time ({chunks} "
            f"ranges); expected at most {chunks}"
        )
    _trained(encoder, spec)
    start, stop = shard_range(shard, shards, n_docs)
    torch_device = resolve_device(device)
    model = load_model(encoder, spec.encoder).to(torch_device)
    started = time.perf_counter()
    doc_ids, tfs = hdct.document_frequencies(model, corpus, spec, start=start, stop=stop)
    record = {
        "shard": {"index": shard, "shards": shards, "start": start, "stop": stop, "chunk": hdct.CHUNK},
        "documents": len(doc_ids),
        "weight_seconds": time.perf_counter() - started,
        "device": str(torch_device),
        "encoder": _weights_digest(encoder),
        "settings": dataclasses.asdict(spec),
    }
    with staged_directory(out) as staging:
        with open(staging / FREQUENCIES, "w", encoding="utf-8") as f:
            for doc_id, tf in zip(doc_ids, tfs):
                f.write(json.dumps([doc_id, sorted(tf.items())]) + "\n")
        write_json(staging / SHARD, record)  # last: a shard with this file is whole
    return record


def complete_shard(
    directory: Path, shard: int, shards: int, doc_ids: list[str], spec: HDCTSettings, encoder: str
) -> tuple[dict, list[Counter]]:
    """The record and frequencies of shard ``shard`` of ``shards`` at ``directory`` if it holds every document of its
    range, weighted with these settings by the encoder whose weights' sha256 is ``encoder``; else an error naming it."""
    start, stop = shard_range(shard, shards, len(doc_ids))
    name, rerun = (
        f"hdct: shard {shard} of {shards} ({directory})",
        f"run `longrank hdct --shard {shard}/{shards}` for it",
    )
    if not (directory / SHARD).is_file() or not (directory / FREQUENCIES).is_file():
        raise InputError(f"{name} is missing; {rerun}")
    record = read_json(directory / SHARD)
    expected = {"index": shard, "shards": shards, "start": start, "stop": stop, "chunk": hdct.CHUNK}
    with open(directory / FREQUENCIES, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    held = [doc_id for doc_id, _ in rows]
    if record["shard"] != expected or held != doc_ids[start:stop] or record["documents"] != len(held):
        raise InputError(
            f"{name} is incomplete: it holds {len(held)} documents (its record says {record['documents']}, range "
            f"{record['shard']}) where documents [{start}, {stop}) of the collection are expected; {rerun}"
        )
    if record["settings"] != json.loads(json.dumps(dataclasses.asdict(spec))):
        raise InputError(f"{name} was weighted with the settings {record['settings']}, not the merge's; {rerun}")
    if record["encoder"] != encoder:
        raise InputError(
            f"{name} was weighted by another encoder (weights sha256 {record['encoder'][:12]}, the merge's "
            f"{encoder[:12]}); {rerun}"
        )
    return record, [Counter(dict(items)) for _, items in rows]


def merge(entry: dict, corpus: Corpus, encoder: Path, shard_dirs: list[Path], out: Path) -> dict:
    """Every shard's frequencies, in order, indexed into ``out`` with the encoder's weights: one job's output."""
    spec = hdct.settings(entry)
    training, digest, doc_ids = _trained(encoder, spec), _weights_digest(encoder), list(corpus.docs)
    if len(shard_dirs) > -(-len(doc_ids) // hdct.CHUNK):
        raise InputError(f"{_key(entry)}: {len(shard_dirs)} shards to merge for {len(doc_ids)} documents")
    tfs: list[Counter] = []
    records = []
    for i, directory in enumerate(shard_dirs):
        record, shard_tfs = complete_shard(Path(directory), i, len(shard_dirs), doc_ids, spec, digest)
        records.append(record)
        tfs += shard_tfs
    seconds = sum(r["weight_seconds"] for r in records)
    with staged_directory(out) as staging:
        for file in sorted(encoder.iterdir()):  # the weights as saved (save_weights: their file and manifest)
            if file.name != TRAINING:
                shutil.copyfile(file, staging / file.name)
        stats = hdct.write_index(staging, doc_ids, tfs, spec, training, seconds, training["device"])
    log.info("hdct: %d shards merged into %s", len(shard_dirs), out)
    return stats
