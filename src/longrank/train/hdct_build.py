"""What stage ``hdct`` (:mod:`longrank.train.hdct`, workflow/rules/hdct.smk) builds: HDCT's term-weight encoder (:mod:`longrank.models.hdct_encoder`) trained on
the collection's titles or a pseudo_queries set, every document weighted through it, and the BM25 index of the
pseudo-documents written (:mod:`longrank.retrieval.hdct_index`), once per collection and first stage; ``candidates``
retrieves from it for every query. HDCT (Dai & Callan, WWW 2020) is a first stage (``method: hdct``) beside BM25,
and the MIR paper's candidate generator. Both stages record their cost (indexing documents per second through the
encoder, query milliseconds) for the report.

- **Training** (never a real query): the target of a passage term is its *term recall* in the document's
  queries, the share of them that contain it. ``targets: titles`` takes the title as the one query (HDCT's
  title supervision; the title is taken out of the passage text, or the target would be a copy); a
  ``pseudo_queries`` set's name takes that set's queries of the document. Mean squared error over the passage's
  non-stop words, AdamW (the encoder at ``lr``, the head at ``head_lr``), ``steps`` steps of ``batch_size``
  passages from documents that have a target.

Why here: the stage needs the network (torch), so it cannot sit with the first stages in ``retrieval/``, which a dry
run imports and which imports no model; and the network's module must not import the first stages' settings and
index format it would need. So the layers point down: ``models/hdct.py`` the network, ``retrieval/hdct.py`` the
index (written and read, torch-free), this module the training and the stage that joins them. The training loop is
HDCT's own (a regression of per-word weights on sampled passages, no query, no ranking loss, no dev evaluation), not
the rankers' trainer (:mod:`longrank.train.trainer`), whose batches, losses and checkpoints are a ranker's.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from longrank.data.corpus import Corpus
from longrank.data.words import stop_words, tokenize
from longrank.errors import InputError
from longrank.io.atomic import staged_directory
from longrank.io.json_yaml import write_json
from longrank.io.trec_files import read_qrels
from longrank.io.text_records import read_tsv_dict
from longrank.models.checkpoint import save_weights
from longrank.models.hdct_encoder import HDCT, WEIGHTS
from longrank.models.modules.encoders import load_encoder, load_tokenizer
from longrank.progress import progress
from longrank.retrieval.first_stage import HDCTSettings
from longrank.retrieval.hdct_index import INDEX, STATS, build_index, passages_of, pseudo_frequencies
from longrank.runtime import resolve_device, seed_everything
from longrank.config.schema import schema_default

log = logging.getLogger(__name__)


def term_recall(words: list[str], queries: list[str]) -> list[float]:
    """Each word's target: the share of ``queries`` whose terms contain it (0 for a stop word)."""
    terms, stop = [set(tokenize(q)) for q in queries], stop_words()
    return [0.0 if w in stop else sum(w in t for t in terms) / len(terms) for w in words]


def _queries_of_documents(
    spec: HDCTSettings, corpus: Corpus, titles: dict[str, str] | None, pseudo_dir: Path | None
) -> dict[str, list[str]]:
    if spec.targets == "titles":
        if not titles:
            raise InputError(
                f"first stage hdct: targets titles, but the collection has no {spec.title_field!r} field; "
                "name a pseudo_queries set in targets instead"
            )
        return {d: [t] for d, t in titles.items() if t.strip() and d in corpus.docs}
    if pseudo_dir is None:
        raise InputError(f"first stage hdct: targets {spec.targets!r} names a pseudo_queries set; give its directory")
    queries, qrels = read_tsv_dict(pseudo_dir / "queries.tsv"), read_qrels(pseudo_dir / "qrels.txt")
    out: dict[str, list[str]] = {}
    for qid, judged in qrels.items():
        for doc_id in judged:
            out.setdefault(doc_id, []).append(queries[qid])
    return out


def training_examples(
    spec: HDCTSettings, corpus: Corpus, queries_of: dict[str, list[str]]
) -> list[tuple[list[str], list[float]]]:
    """(passage words, targets) of every passage of the documents that have queries; with title targets the
    title's words are taken out of the passage first (title and body repeat each other in many collections)."""
    examples = []
    for doc_id in sorted(queries_of):
        text = corpus.docs[doc_id]
        if spec.targets == "titles":
            title_words = tokenize(queries_of[doc_id][0])
            words = tokenize(text)
            for start in [i for i in range(len(words)) if words[i : i + len(title_words)] == title_words][::-1]:
                del words[start : start + len(title_words)]
            text = " ".join(words)
        for words in passages_of(text, spec.passage_words, spec.max_passages):
            examples.append((words, term_recall(words, queries_of[doc_id])))
    if not examples:
        raise InputError("first stage hdct: no document has a training target")
    return examples


def train_model(model: HDCT, examples, spec: HDCTSettings) -> list[dict]:
    """MSE of the predicted weights against the targets; returns the loss curve (every 50 steps)."""
    seed_everything(spec.seed)
    # the new head at its own, higher rate: at the encoder's 2e-5 a freshly initialised head barely moves in a few
    # hundred CPU steps
    optimizer = torch.optim.AdamW(
        [
            {"params": model.encoder.parameters(), "lr": spec.lr},
            {"params": model.head.parameters(), "lr": spec.head_lr},
        ]
    )
    rng = np.random.default_rng(spec.seed)
    model.train()
    curve, window, stop = [], [], stop_words()
    for step in progress(range(spec.steps), desc="train hdct", unit="step", mininterval=5):
        batch = [
            examples[i] for i in rng.choice(len(examples), size=min(spec.batch_size, len(examples)), replace=False)
        ]
        predicted = model([words for words, _ in batch])
        losses = []
        for (words, targets), weights in zip(batch, predicted):
            mask = torch.tensor([w not in stop for w in words], device=model.device)
            if mask.any():
                losses.append(((weights - torch.tensor(targets, device=model.device)) ** 2)[mask].mean())
        if not losses:
            continue
        loss = torch.stack(losses).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        window.append(loss.item())
        if (step + 1) % 50 == 0 or step + 1 == spec.steps:
            curve.append({"step": step + 1, "train_loss": sum(window) / len(window)})
            window.clear()
    model.eval()
    return curve


#: documents weighted together, their passages batched across them: a shard's range starts at a multiple of it
#: (hdct_shards.shard_range), so that every passage is weighted in the batch it meets in one job, the same numbers
CHUNK = 256


@torch.no_grad()
def document_frequencies(
    model: HDCT, corpus: Corpus, spec: HDCTSettings, batch_size: int = 32, start: int = 0, stop: int | None = None
) -> tuple[list[str], list[Counter]]:
    """The pseudo term frequencies of documents ``start`` to ``stop - 1`` (all by default; ids in collection order),
    ``CHUNK`` documents' passages at a time from ``start``."""
    doc_ids, stop_list, chunk = list(corpus.docs)[start:stop], stop_words(), CHUNK
    tfs = []
    for first in progress(range(0, len(doc_ids), chunk), desc="hdct weights", unit=f"x{chunk} docs", mininterval=5):
        flat, owner = [], []
        for k, doc_id in enumerate(doc_ids[first : first + chunk]):
            for words in passages_of(corpus.docs[doc_id], spec.passage_words, spec.max_passages):
                flat.append(words)
                owner.append(k)
        per_doc: list[list[list[tuple[str, float]]]] = [[] for _ in doc_ids[first : first + chunk]]
        for i in range(0, len(flat), batch_size):
            for words, weights, k in zip(
                flat[i : i + batch_size], model(flat[i : i + batch_size]), owner[i : i + batch_size]
            ):
                per_doc[k].append([(w, x) for w, x in zip(words, weights.tolist()) if w not in stop_list])
        tfs += [pseudo_frequencies(p, spec.m, spec.combine) for p in per_doc]
    return doc_ids, tfs


def settings(spec: dict) -> HDCTSettings:
    """The hdct first stage's settings of a first_stages entry (its other keys, name and top_k, are the workflow's)."""
    return HDCTSettings.from_spec(spec, f"first_stages.{spec.get('name', 'hdct')}")


def train_encoder(
    spec: HDCTSettings,
    corpus: Corpus,
    titles: dict[str, str] | None,
    pseudo_dir: Path | None,
    torch_device: torch.device,
) -> tuple[HDCT, dict]:
    """HDCT trained on the collection's titles or pseudo-queries, and what its training was: the passages it drew
    from, its seconds and loss curve (``stats.json``'s, or with shards the encoder job's ``training.json``)."""
    started = time.perf_counter()
    examples = training_examples(spec, corpus, _queries_of_documents(spec, corpus, titles, pseudo_dir))
    seed_everything(spec.seed)
    model = HDCT(load_encoder(spec.encoder), load_tokenizer(spec.encoder)).to(torch_device)
    curve = train_model(model, examples, spec) if spec.steps else []
    training = {"training_passages": len(examples), "train_seconds": time.perf_counter() - started}
    return model, {**training, "loss_curve": curve}


def write_index(
    staging: Path,
    doc_ids: list[str],
    tfs: list[Counter],
    spec: HDCTSettings,
    training: dict,
    weight_seconds: float,
    device: str,
) -> dict:
    """The bm25s index of every document's pseudo term frequencies and ``stats.json`` into ``staging`` (the stage's
    output being written: one job's, or the shards' merge, which writes the same)."""
    started = time.perf_counter()
    build_index(doc_ids, tfs, spec.k1, spec.b, staging / INDEX)
    lengths = [sum(tf.values()) for tf in tfs]
    stats = {
        "training_passages": training["training_passages"],
        "train_seconds": training["train_seconds"],
        "weight_seconds": weight_seconds,
        "index_seconds": time.perf_counter() - started,
        "docs_per_second": len(doc_ids) / max(1e-9, weight_seconds),
        "documents": len(doc_ids),
        "empty_documents": sum(n == 0 for n in lengths),
        "pseudo_length_mean": float(np.mean(lengths)),
        "distinct_terms_mean": float(np.mean([len(tf) for tf in tfs])),
        "index_mb": sum(p.stat().st_size for p in (staging / INDEX).rglob("*") if p.is_file()) / 1e6,
        "device": device,
        "settings": dataclasses.asdict(spec),
        "loss_curve": training["loss_curve"],
    }
    write_json(staging / STATS, stats)
    log.info(
        "hdct: %d documents weighted at %.1f docs/s, pseudo-documents of %.0f terms on average",
        len(doc_ids),
        stats["docs_per_second"],
        stats["pseudo_length_mean"],
    )
    return stats


def build(
    entry: dict,
    corpus: Corpus,
    out: Path,
    titles: dict[str, str] | None = None,
    pseudo_dir: Path | None = None,
    device: str = schema_default("device"),
) -> dict:
    """Train HDCT on the collection's titles or pseudo-queries, weight every document, index: ``out`` gets the
    weights, the index and the stats, or (on failure) stays as it was."""
    spec = settings(entry)
    torch_device = resolve_device(device)
    model, training = train_encoder(spec, corpus, titles, pseudo_dir, torch_device)
    started = time.perf_counter()
    doc_ids, tfs = document_frequencies(model, corpus, spec)
    weight_seconds = time.perf_counter() - started
    with staged_directory(out) as staging:
        save_weights(model, staging / WEIGHTS)
        return write_index(staging, doc_ids, tfs, spec, training, weight_seconds, str(torch_device))
