"""Stage ``graphs``: MIR's passages, pivot nodes and multi-view graphs (Fu et al., WSDM 2022, Sec. 3.1), one
record per document of the collection, for one named graph set (``mir_graphs: {<set>: {...}}`` in the config).

- Passages (Sec. 3.1.1): windows of ``window`` WordPiece tokens every ``stride = round(window·(1-overlap))``
  over the first ``max_doc_tokens`` tokens of the annotated text (``annotate.cut_text``), the tail the stride
  skips covered by one more window, as ``BertRanker.passages`` cuts them. Each passage's ids carry an [SNT]
  marker (BERT's [SEP], its pretrained boundary token) before each sentence piece; the model prepends [PSG]
  (BERT's [CLS], its pretrained summary token) and the query. Short documents adapt, as MaxP's passages do: a
  document of fewer than ``window`` tokens (an abstract of 40 words is about 55) is one passage holding all of it,
  with no p2p edge (there is no other passage) while its s2s and t2t graphs link its sentences and mentions as in
  any passage; an empty document is one passage holding a lone [SNT]. MIR then reads it as BERT-MaxP reads a
  one-passage document, so no error: the graphs simply have less to connect.
- Pivots (Sec. 3.1.2): P nodes, one per passage; S nodes, one per [SNT]; T nodes, one per mention per passage
  of an entity (spaCy's NER, labels ``entity_labels``, in place of TagMe) or of a PRF word: Eq. 1's weight
  y_{t,d} = |Q_{d,t}| / |Q_d| over a pseudo-query set's queries Q_d that rank d in their BM25 top
  ``prf_depth``, the ``prf_terms`` best words per document (HDCT's weak supervision, the paper's [9]).
- Edges (Sec. 3.1.3): t2t between T nodes of the same entity or word; s2s between S nodes whose sentence pieces
  mention a common T-node key; p2p from each passage to its ``p2p_top_k`` most tf-idf-cosine-similar others.

Settings (``--config``, inline JSON; defaults CPU-sized, the paper's in brackets): ``encoder`` (minilm: whose
tokenizer cuts the documents), ``window`` (128 [128]), ``overlap`` (0.25 [0.25]), ``max_doc_tokens`` (2048
[2048]), ``max_sentence_nodes`` (64 [64]) and ``max_token_nodes`` (256 [256]): caps keeping a document's first
nodes, ``entity_labels`` (every spaCy label but the numeric ones: TagMe links names, not numbers),
``prf_depth`` (10 [10]), ``prf_terms`` (10 [10]), ``p2p_top_k`` (5 [5]).

A document's record (positions index the passage's ``ids``; node indices count in document order)::

    {"passages": [[id, ...], ...], "sentences": [[passage, position], ...],
     "tokens": [[passage, [position, ...]], ...], "token_keys": ["e:new mexico", "w:obesity", ...],
     "edges": {"p2p": [[i, j], ...], "s2s": [...], "t2t": [...]}, "n_tokens": 1234}

Output directory: ``graphs.sqlite`` (read it with ``data.records.GraphStore``), ``settings.json`` (the settings
plus the tokenizer's ``cls_id``, ``sep_id``, ``pad_id``, ``vocab_size``), ``stats.json``. ``--shard i/N`` builds one
range of the documents and ``--merge`` joins the shards into the same bytes (``mir_graphs.<set>.shards``,
graph_shards.py).
"""

from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict
from collections.abc import Container, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Protocol

from longrank.progress import progress

from longrank.data.corpus import Corpus
from longrank.mir_graphs.annotate import Annotations, cut_text, read_config, shard_argument
from longrank.mir_graphs.graph_shards import SIZES, Sizes, merge, set_stats, shard_of
from longrank.data.records import GRAPHS, SETTINGS, RecordWriter
from longrank.mir_graphs.record import build_record, fit_tfidf, words
from longrank.data.mir_graph_settings import GraphSetSettings, graph_settings
from longrank.mir_graphs.record import p2p_edges as p2p_edges, passage_windows as passage_windows  # re-exported
from longrank.errors import InputError
from longrank.io.atomic import staged_directory
from longrank.io.json_yaml import write_json
from longrank.io.trec_files import Run, read_run
from longrank.io.text_records import read_tsv_dict

log = logging.getLogger(__name__)


def prf_weights(
    queries: Mapping[str, str], run: Run, depth: int, leave_out: Mapping[str, Iterable[str]] = {}
) -> dict[str, dict[str, float]]:
    """Eq. 1: per document d, y_{t,d} = |Q_{d,t}| / |Q_d| for each word t with y > 0, where Q_d are the queries
    ranking d in their top ``depth`` (by score, ties by doc id) and Q_{d,t} those of them whose text has t.
    ``leave_out`` (query -> documents) keeps a query out of those documents' Q_d, after ranking."""
    pseudo_relevant: dict[str, list[str]] = defaultdict(list)
    for qid, ranking in run.items():
        if qid not in queries:
            raise InputError(f"PRF queries: query {qid!r} of the run has no text in queries.tsv")
        for doc_id in sorted(ranking, key=lambda d: (-ranking[d], d))[:depth]:
            if doc_id not in leave_out.get(qid, ()):
                pseudo_relevant[doc_id].append(qid)
    query_words = {qid: set(words(queries[qid])) for qids in pseudo_relevant.values() for qid in qids}
    out = {}
    for doc_id, qids in pseudo_relevant.items():
        counts = Counter(word for qid in qids for word in query_words[qid])
        out[doc_id] = {word: count / len(qids) for word, count in counts.items()}
    return out


class TextsById(Protocol):
    """What ``prf_words`` reads of the documents: whether one is there, and its text (a Mapping, or ``_ReadTexts``)."""

    def __contains__(self, doc_id: object, /) -> bool: ...

    def __getitem__(self, doc_id: str, /) -> str: ...


def prf_words(
    queries: Mapping[str, str],
    run: Run,
    doc_texts: TextsById,
    depth: int,
    n_terms: int,
    leave_out: Mapping[str, Iterable[str]] = {},
    only: Container[str] | None = None,
) -> dict[str, list[str]]:
    """Each document's PRF words: the ``n_terms`` of highest Eq. 1 weight (ties alphabetical) that occur in its
    text as read (``doc_texts[doc_id]``); documents without any are left out, and with ``only`` (a shard's
    documents) the documents not in it."""
    out = {}
    for doc_id, weights in prf_weights(queries, run, depth, leave_out).items():
        if doc_id not in doc_texts:
            raise InputError(f"PRF queries: the run ranks document {doc_id!r}, which is not in the collection")
        if only is not None and doc_id not in only:
            continue
        present = set(words(doc_texts[doc_id]))
        ranked = sorted((w for w in weights if w in present), key=lambda w: (-weights[w], w))[:n_terms]
        if ranked:
            out[doc_id] = ranked
    return out


class _ReadTexts:
    """doc id -> the text a graph reads of it (its first ``max_doc_tokens`` tokens of the annotated cut), for
    the PRF words, which must occur in it."""

    def __init__(self, docs: Mapping[str, str], max_words: int, tokenizer, max_tokens: int):
        self.docs, self.max_words, self.tokenizer, self.max_tokens = docs, max_words, tokenizer, max_tokens

    def __contains__(self, doc_id) -> bool:
        return doc_id in self.docs

    def __getitem__(self, doc_id: str) -> str:
        text = cut_text(self.docs[doc_id], self.max_words)
        offsets = self.tokenizer(
            text,
            add_special_tokens=False,
            return_offsets_mapping=True,
            truncation=True,
            max_length=self.max_tokens,
            split_special_tokens=True,
        )["offset_mapping"]
        return text[: offsets[-1][1]] if offsets else ""


def read_prf_queries(directory: str | Path) -> tuple[dict[str, str], Run]:
    """A pseudo-query set's ``queries.tsv`` and ``candidates.run`` (stage ``pseudo_queries``)."""
    directory = Path(directory)
    if not (directory / "queries.tsv").exists():
        raise InputError(f"--prf-queries {directory}: queries.tsv not found; give a pseudo_queries set's directory")
    return read_tsv_dict(directory / "queries.tsv"), read_run(directory / "candidates.run")


def build(
    corpus: Corpus,
    annotations: Annotations,
    prf_dir: str | Path | None,
    cfg: dict,
    out: Path,
    prf_leave_out: Mapping[str, Iterable[str]] = {},
    shard: dict | None = None,
) -> dict:
    """Write the graph set of ``corpus`` to ``out`` (whole, or nothing: it is made in a staging directory beside
    it) and return its stats; with ``shard`` (``graph_shards.shard_of``) only its range of documents, its sizes
    (``graph_shards.SIZES``) beside them for the merge."""
    s = graph_settings(cfg)
    tokenizer = _fast_tokenizer(s.encoder)
    docs, max_words = corpus.docs, annotations.max_words
    begin = time.perf_counter()
    # a shard too weighs its passages by the whole collection's document frequencies: its p2p edges are one job's
    vectorizer = fit_tfidf(
        cut_text(text, max_words)
        for text in progress(docs.values(), total=len(docs), desc="graphs: tf-idf", unit="doc", mininterval=5)
    )
    n, items = (len(docs), docs.items()) if shard is None else _shard_items(docs, shard)
    prf = {}
    if prf_dir is not None:
        queries, run = read_prf_queries(prf_dir)
        # a shard reads the PRF words of its own documents only: each document's words are its own (Eq. 1)
        only = None if shard is None else {doc_id for doc_id, _ in _shard_items(docs, shard)[1]}
        texts = _ReadTexts(docs, max_words, tokenizer, s.max_doc_tokens)
        prf = prf_words(queries, run, texts, s.prf_depth, s.prf_terms, prf_leave_out, only)
    inputs = _inputs(annotations, prf_dir)
    with staged_directory(out) as staging:
        sizes = _write_records(staging / GRAPHS, items, n, annotations, prf, tokenizer, s, vectorizer)
        stats = set_stats(sizes, time.perf_counter() - begin, inputs, len(prf), s)
        if shard is not None:
            stats["shard"] = shard
            sizes.save(staging / SIZES)
        write_json(staging / SETTINGS, {**s.to_json(), **_tokenizer_ids(tokenizer)})
        write_json(staging / "stats.json", stats)
    _log_stats(stats)
    return stats


def _shard_items(docs, shard: dict) -> tuple[int, Iterator[tuple[str, str]]]:
    """A shard's documents, streamed in the collection's order: how many, and ``(doc_id, text)`` pairs."""
    return shard["stop"] - shard["start"], docs.items_range(shard["start"], shard["stop"])


def _fast_tokenizer(encoder: str):
    """The encoder's tokenizer, which must give character offsets."""
    from longrank.models.modules.encoders import load_tokenizer

    tokenizer = load_tokenizer(encoder)
    if not tokenizer.is_fast:
        raise InputError(f"mir_graphs.encoder: {encoder!r} has no fast tokenizer (character offsets are needed)")
    return tokenizer


def _tokenizer_ids(tokenizer) -> dict[str, int]:
    """What the model checks its own tokenizer against (``settings.json``)."""
    return {
        "cls_id": tokenizer.cls_token_id,
        "sep_id": tokenizer.sep_token_id,
        "pad_id": tokenizer.pad_token_id,
        "vocab_size": tokenizer.vocab_size,
    }


def _write_records(
    path: Path,
    items: Iterable[tuple[str, str]],
    n: int,
    annotations: Annotations,
    prf: dict,
    tokenizer,
    s: GraphSetSettings,
    vectorizer,
) -> Sizes:
    """One record per document of ``items`` (``n`` of them, streamed) into ``path``; each record's construction time
    and, per view and graph, its numbers of nodes and edges."""
    max_words = annotations.max_words
    sizes = Sizes()
    with RecordWriter(path, "graphs") as writer:
        for doc_id, text in progress(items, total=n, desc="graphs", unit="doc", mininterval=5):
            annotation = annotations[doc_id]
            start = time.perf_counter()
            try:
                record = build_record(
                    cut_text(text, max_words), annotation, prf.get(doc_id, []), tokenizer, s, vectorizer
                )
            except InputError as err:
                raise InputError(f"document {doc_id!r}: {err}") from None
            sizes.add(time.perf_counter() - start, record)
            writer.add(doc_id, record)
    return sizes


def _log_stats(stats: dict) -> None:
    log.info(
        "graphs: %d documents in %.0f s (%.1f ms each); per document %.1f passages, %.1f sentence and %.1f token "
        "nodes; %.0f%% / %.0f%% under the sentence / token caps",
        stats["documents"],
        stats["seconds"],
        1000 * stats["construction_seconds_per_document"]["mean"],
        stats["nodes"]["passages"]["mean"],
        stats["nodes"]["sentences"]["mean"],
        stats["nodes"]["tokens"]["mean"],
        100 * stats["under_cap"]["sentences"],
        100 * stats["under_cap"]["tokens"],
    )


def add_arguments(parser) -> None:
    parser.add_argument("--data", required=True, help="results/{dataset}/data")
    parser.add_argument("--annotations", required=True, help="the annotate stage's directory")
    parser.add_argument(
        "--prf-queries",
        help="a pseudo_queries set's directory (queries.tsv, candidates.run): PRF words "
        "as token pivots; without it, entities only",
    )
    parser.add_argument(
        "--pretrain-queries",
        help="a pseudo_queries set's directory: build the set as pre-training on it "
        "reads the collection (see pretraining_inputs)",
    )
    parser.add_argument("--config", default="{}", help="the graph set's settings as inline JSON")
    parser.add_argument("--out", required=True, help="the graph set's directory (of one shard with --shard)")
    spread = parser.add_mutually_exclusive_group()
    spread.add_argument("--shard", type=shard_argument, help="i/N: build only shard i of N (mir_graphs.<set>.shards)")
    spread.add_argument("--merge", nargs="+", type=Path, help="the shards' directories, in order, merged into --out")


def pretraining_inputs(
    data: str | Path,
    pseudo_dir: str | Path,
    annotations: Annotations,
    prf_dir: str | Path | None,
    shard: dict | None = None,
) -> tuple[Corpus, dict[str, set[str]]]:
    """The collection as pre-training on a pseudo-query set reads it, and the PRF pairs to leave out.

    Pre-training reads each pseudo-query's positive without the text the query came from (``overrides.jsonl``), so
    that a model cannot find the query copied verbatim; MIR reads records, not text, so its graphs must be cut from
    those texts too: they are annotated afresh. Where the PRF terms come from the same set, a positive's own
    pseudo-query is left out of its Eq. 1 weights, or its pivots would mark the query's words in it. A shard
    (``graph_shards.shard_of``) annotates its own range's positives only: the others are other shards' records."""
    from longrank.data.corpus import PseudoQueryCorpus

    corpus = PseudoQueryCorpus(data, pseudo_dir)
    overrides = corpus.docs.overrides
    if shard is not None:
        ids = {doc_id for doc_id, _ in _shard_items(corpus.docs, shard)[1]}
        overrides = {doc_id: text for doc_id, text in overrides.items() if doc_id in ids}
    annotations.reannotate(overrides)
    leave_out: dict[str, set[str]] = {}
    if prf_dir is not None and Path(prf_dir).resolve() == Path(pseudo_dir).resolve():
        for qid, judged in corpus.qrels.items():
            leave_out[qid] = {d for d, gain in judged.items() if gain > 0}
    return corpus, leave_out


def _inputs(annotations: Annotations, prf_dir: str | Path | None) -> dict:
    """What a graph set's ``stats.json`` records of its inputs, and what the merge checks each shard was built from."""
    return {
        "annotations": str(annotations.path.parent),
        "max_words": annotations.max_words,
        "prf_queries": None if prf_dir is None else str(prf_dir),
    }


def run(args) -> None:
    cfg = read_config(args.config, "graphs")
    s = graph_settings(cfg)  # a bad setting fails before anything is read
    annotations = Annotations(args.annotations)
    corpus = Corpus(args.data)
    n_docs = len(corpus.docs)  # the collection's, which the shards split (the pre-training set's are the same ids)
    if args.merge is not None:  # the records are the shards': nothing is read or annotated afresh
        shards = [shard_of(i, len(args.merge), n_docs, args.pretrain_queries) for i in range(len(args.merge))]
        merge(args.merge, shards, _inputs(annotations, args.prf_queries), s, Path(args.out))
        return
    shard = None if args.shard is None else shard_of(args.shard[0], args.shard[1], n_docs, args.pretrain_queries)
    leave_out: dict[str, set[str]] = {}
    if args.pretrain_queries:
        corpus, leave_out = pretraining_inputs(args.data, args.pretrain_queries, annotations, args.prf_queries, shard)
    build(corpus, annotations, args.prf_queries, cfg, Path(args.out), leave_out, shard)
