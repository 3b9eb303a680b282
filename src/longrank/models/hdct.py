"""HDCT (Dai & Callan, WWW 2020, "Context-aware document term weighting for ad-hoc search"): a pretrained
encoder with a per-token regression head predicts how important each term of a passage is; the weights become
pseudo term frequencies, and the documents are indexed with BM25 over them. A first stage (``method: hdct``)
beside BM25, and the MIR paper's candidate generator.

- **Passages**: each document's words (lower-cased ``\\w+`` runs, ``data/words.py``) in passages of
  ``passage_words`` words, at most ``max_passages`` of them (what lies beyond is not indexed). A document shorter
  than ``passage_words`` (an abstract of 40 words under the default 100) is one passage, the whole document: its
  weights are HDCT's weights of the whole text, as a passage of a long document is weighted in its own context, so
  short collections are indexed as they are, with no error. A document without a word is an empty pseudo-document
  (found by no query); a collection in which no document keeps an indexable term stops with an ``InputError``.
- **Term weights**: the encoder reads a passage (its words given as pre-split words; a word's weight is its
  first WordPiece's output); a linear head gives each word occurrence a weight ŷ, clipped at 0 (stop words are
  not indexed).
- **Pseudo term frequencies**: a term of a passage counts round(m · √ŷ) (``m`` = 100, the paper's N) once per
  passage, with the largest prediction among its occurrences there, as in DeepCT and HDCT: the predicted importance
  replaces the term's frequency rather than multiplying it (HDCT's released script keeps each passage term's
  largest rounded weight and drops those below 1). The passages' weights are combined by ``combine``: ``max``,
  ``sum``, or ``decay`` (the paper's position-decayed sum: passage i counts 1 / (i + 1)), and truncated to an
  integer, as that script does. The pseudo-document repeats each term tf times and bm25s indexes it (``k1``,
  ``b``), as HDCT's pseudo-documents were indexed with an ordinary BM25 engine.
- **Training** (never a real query): the target of a passage term is its *term recall* in the document's
  queries, the share of them that contain it. ``targets: titles`` takes the title as the one query (HDCT's
  title supervision; the title is taken out of the passage text, or the target would be a copy); a
  ``pseudo_queries`` set's name takes that set's queries of the document. Mean squared error over the passage's
  non-stop words, AdamW (the encoder at ``lr``, the head at ``head_lr``), ``steps`` steps of ``batch_size``
  passages from documents that have a target.

The stage ``hdct`` (workflow/rules/hdct.smk) trains the model and writes the index once per collection;
``candidates`` retrieves from it for every query. Both record their cost (indexing documents per second
through the encoder, query milliseconds) for the report.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from torch import nn

from longrank.data.collections import read_field
from longrank.data.corpus import Corpus
from longrank.data.words import STOP_WORDS, tokenize
from longrank.io import (
    InputError,
    names_full_disk,
    read_qrels,
    read_tsv_dict,
    replace_directory,
    umask_mode,
    write_json,
)
from longrank.models.checkpoint import load_weights, save_weights
from longrank.models.modules.encoders import load_encoder, load_tokenizer
from longrank.progress import progress
from longrank.retrieval.first_stage import HDCT_COMBINE, HDCTSettings
from longrank.retrieval.hdct import INDEX, STATS
from longrank.runtime import resolve_device, seed_everything
from longrank.schema import schema_default

log = logging.getLogger(__name__)

METHOD = "hdct"
WEIGHTS = "model.safetensors"


class HDCT(nn.Module):
    """The encoder and its per-token regression head."""

    def __init__(self, encoder, tokenizer, max_tokens: int = 256):
        super().__init__()
        self.encoder, self.tokenizer, self.max_tokens = encoder, tokenizer, max_tokens
        self.head = nn.Linear(encoder.config.hidden_size, 1)

    @property
    def device(self) -> torch.device:
        return self.head.weight.device

    def forward(self, passages: list[list[str]]) -> list[torch.Tensor]:
        """Per passage, one weight per word (words the tokenizer cut off past ``max_tokens`` get 0)."""
        enc = self.tokenizer(
            passages,
            is_split_into_words=True,
            truncation=True,
            max_length=self.max_tokens,
            padding=True,
            return_tensors="pt",
        )
        states = self.encoder(
            input_ids=enc["input_ids"].to(self.device), attention_mask=enc["attention_mask"].to(self.device)
        ).last_hidden_state
        raw = self.head(states).squeeze(-1)  # [B, T]
        out = []
        for i, words in enumerate(passages):
            first = {}
            for position, word in enumerate(enc.word_ids(i)):
                if word is not None and word not in first:
                    first[word] = position
            index = torch.tensor([first.get(w, -1) for w in range(len(words))], device=self.device)
            weights = raw[i].gather(0, index.clamp(min=0))
            out.append(torch.where(index >= 0, weights, torch.zeros_like(weights)))
        return out


def passages_of(text: str, passage_words: int, max_passages: int) -> list[list[str]]:
    """The document's words in passages of ``passage_words`` (the last one shorter; a short document one passage,
    all of it; no words no passage), the first ``max_passages`` of them."""
    words = tokenize(text)
    return [
        words[i : i + passage_words] for i in range(0, min(len(words), passage_words * max_passages), passage_words)
    ]


def term_recall(words: list[str], queries: list[str]) -> list[float]:
    """Each word's target: the share of ``queries`` whose terms contain it (0 for a stop word)."""
    terms = [set(tokenize(q)) for q in queries]
    return [0.0 if w in STOP_WORDS else sum(w in t for t in terms) / len(terms) for w in words]


def pseudo_frequencies(passages: list[list[tuple[str, float]]], m: int = 100, combine: str = "decay") -> Counter:
    """A document's pseudo term frequencies from its passages' (term, predicted weight) occurrences: in each passage
    a term counts once, round(m·√w) of its largest w (clipped at 0; below 1 it is not indexed), combined over the
    passages (``max``, ``sum``, or ``decay``: passage i counts 1 / (i + 1)) and truncated to an integer."""
    if combine not in HDCT_COMBINE:
        raise InputError(f"first stage hdct: combine {combine!r} is not one of {list(HDCT_COMBINE)}")
    tf: dict[str, float] = {}
    for i, occurrences in enumerate(passages):
        own: dict[str, int] = {}
        for term, w in occurrences:
            own[term] = max(own.get(term, 0), round(m * math.sqrt(max(0.0, w))))
        for term, f in own.items():
            if f < 1:
                continue
            if combine == "max":
                tf[term] = max(tf.get(term, 0.0), f)
            else:
                tf[term] = tf.get(term, 0.0) + (f / (i + 1) if combine == "decay" else f)
    return Counter({t: int(f) for t, f in tf.items() if int(f) > 0})


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
    curve, window = [], []
    for step in progress(range(spec.steps), desc="train hdct", unit="step", mininterval=5):
        batch = [
            examples[i] for i in rng.choice(len(examples), size=min(spec.batch_size, len(examples)), replace=False)
        ]
        predicted = model([words for words, _ in batch])
        losses = []
        for (words, targets), weights in zip(batch, predicted):
            mask = torch.tensor([w not in STOP_WORDS for w in words], device=model.device)
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


@torch.no_grad()
def document_frequencies(
    model: HDCT, corpus: Corpus, spec: HDCTSettings, batch_size: int = 32, chunk: int = 256
) -> tuple[list[str], list[Counter]]:
    """Every document's pseudo term frequencies (ids in collection order), ``chunk`` documents' passages at a time."""
    doc_ids = list(corpus.docs)
    tfs = []
    for start in progress(range(0, len(doc_ids), chunk), desc="hdct weights", unit=f"x{chunk} docs", mininterval=5):
        flat, owner = [], []
        for k, doc_id in enumerate(doc_ids[start : start + chunk]):
            for words in passages_of(corpus.docs[doc_id], spec.passage_words, spec.max_passages):
                flat.append(words)
                owner.append(k)
        per_doc: list[list[list[tuple[str, float]]]] = [[] for _ in doc_ids[start : start + chunk]]
        for i in range(0, len(flat), batch_size):
            for words, weights, k in zip(
                flat[i : i + batch_size], model(flat[i : i + batch_size]), owner[i : i + batch_size]
            ):
                per_doc[k].append([(w, x) for w, x in zip(words, weights.tolist()) if w not in STOP_WORDS])
        tfs += [pseudo_frequencies(p, spec.m, spec.combine) for p in per_doc]
    return doc_ids, tfs


def build_index(doc_ids: list[str], tfs: list[Counter], k1: float, b: float, out: Path) -> None:
    """bm25s over the pseudo-documents (each term repeated tf times), saved with the document ids."""
    import bm25s

    if not any(tfs):  # bm25s cannot index a collection without a term
        raise InputError(
            f"first stage hdct: none of the {len(tfs)} documents keeps an indexable term (every word a stop "
            "word, or every weight rounded to 0); check the collection's text, or raise m"
        )
    pseudo_documents = [[t for t, f in sorted(tf.items()) for _ in range(f)] for tf in tfs]
    retriever = bm25s.BM25(k1=k1, b=b, method="lucene")
    retriever.index(pseudo_documents, show_progress=False)
    retriever.save(str(out))
    (out / "doc_ids.json").write_text(json.dumps(doc_ids), encoding="utf-8")


def settings(spec: dict) -> HDCTSettings:
    """The hdct first stage's settings of a first_stages entry (its other keys, name and top_k, are the workflow's)."""
    return HDCTSettings.from_spec(spec, f"first_stages.{spec.get('name', 'hdct')}")


def build(
    spec: dict,
    corpus: Corpus,
    out: Path,
    titles: dict[str, str] | None = None,
    pseudo_dir: Path | None = None,
    device: str = schema_default("device"),
) -> dict:
    """Train HDCT on the collection's titles or pseudo-queries, weight every document, index: ``out`` gets the
    weights, the index and the stats, or (on failure) stays as it was."""
    spec = settings(spec)
    device = resolve_device(device)
    started = time.perf_counter()
    examples = training_examples(spec, corpus, _queries_of_documents(spec, corpus, titles, pseudo_dir))
    seed_everything(spec.seed)
    model = HDCT(load_encoder(spec.encoder), load_tokenizer(spec.encoder)).to(device)
    curve = train_model(model, examples, spec) if spec.steps else []
    trained = time.perf_counter()
    doc_ids, tfs = document_frequencies(model, corpus, spec)
    weighted = time.perf_counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        with names_full_disk(out, staging):  # a full disk names the output, not the staging name
            save_weights(model, staging / WEIGHTS)
            build_index(doc_ids, tfs, spec.k1, spec.b, staging / INDEX)
            indexed = time.perf_counter()
            lengths = [sum(tf.values()) for tf in tfs]
            stats = {
                "training_passages": len(examples),
                "train_seconds": trained - started,
                "weight_seconds": weighted - trained,
                "index_seconds": indexed - weighted,
                "docs_per_second": len(doc_ids) / max(1e-9, weighted - trained),
                "documents": len(doc_ids),
                "empty_documents": sum(n == 0 for n in lengths),
                "pseudo_length_mean": float(np.mean(lengths)),
                "distinct_terms_mean": float(np.mean([len(tf) for tf in tfs])),
                "index_mb": sum(p.stat().st_size for p in (staging / INDEX).rglob("*") if p.is_file()) / 1e6,
                "device": str(device),
                "settings": dataclasses.asdict(spec),
                "loss_curve": curve,
            }
            write_json(staging / STATS, stats)
            staging.chmod(umask_mode(0o777))
            replace_directory(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log.info(
        "hdct: %d documents weighted at %.1f docs/s, pseudo-documents of %.0f terms on average",
        len(doc_ids),
        stats["docs_per_second"],
        stats["pseudo_length_mean"],
    )
    return stats


def load_model(directory: Path, spec: dict) -> HDCT:
    spec = settings(spec)
    model = HDCT(load_encoder(spec.encoder), load_tokenizer(spec.encoder))
    load_weights(model, directory / WEIGHTS)
    return model.eval()


def add_arguments(parser) -> None:
    parser.add_argument("--data", required=True, help="results/{dataset}/data")
    parser.add_argument("--first-stage", required=True, help="the first_stages entry (method hdct) as JSON")
    parser.add_argument(
        "--dataset", help="the config's dataset block as JSON (targets titles reads the titles from it)"
    )
    parser.add_argument("--pseudo-queries", help="targets <set>: the pseudo_queries set's directory")
    parser.add_argument("--device", default=schema_default("device"))
    parser.add_argument("--out", required=True, help="results/{dataset}/hdct/{first stage name}")


def run(args) -> None:
    spec = json.loads(args.first_stage)
    full = settings(spec)
    titles = None
    if full.targets == "titles":
        if not args.dataset:
            raise InputError("hdct: targets titles needs --dataset (the collection to read titles from)")
        titles = read_field(json.loads(args.dataset), full.title_field)
    build(
        spec,
        Corpus(args.data),
        Path(args.out),
        titles,
        Path(args.pseudo_queries) if args.pseudo_queries else None,
        args.device,
    )
