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
plus the tokenizer's ``cls_id``, ``sep_id``, ``pad_id``, ``vocab_size``), ``stats.json``.
"""

from __future__ import annotations

import logging
import re
import shutil
import tempfile
import time
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from itertools import combinations
from pathlib import Path

import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, TfidfVectorizer
from longrank.progress import progress

from longrank.data.corpus import Corpus
from longrank.graphs.annotate import Annotations, cut_text, read_config
from longrank.data.records import GRAPHS, SETTINGS, RecordWriter
from longrank.io import InputError, Run, read_run, read_tsv_dict, replace_directory, umask_mode, write_json

log = logging.getLogger(__name__)

NUMERIC_LABELS = ("DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL")
# en_core_web_sm's NER labels (OntoNotes 5) without the numeric ones
ENTITY_LABELS = ["PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW", "LANGUAGE"]
DEFAULTS = {
    "encoder": "minilm",
    "window": 128,
    "overlap": 0.25,
    "max_doc_tokens": 2048,
    "max_sentence_nodes": 64,
    "max_token_nodes": 256,
    "entity_labels": ENTITY_LABELS,
    "prf_depth": 10,
    "prf_terms": 10,
    "p2p_top_k": 5,
}
POSITIVE = ("window", "max_doc_tokens", "prf_depth")
NON_NEGATIVE = ("max_sentence_nodes", "max_token_nodes", "prf_terms", "p2p_top_k")
# ASCII letters and digits, lower-cased after matching: "lowercase [a-z0-9] runs" whose offsets stay those of
# the text (lower-casing first can change a string's length: "İ".lower() has two characters)
_WORD = re.compile(r"[A-Za-z0-9]{2,}")


def graph_settings(cfg: dict) -> dict:
    """The graph set's configuration with defaults, checked: errors name ``mir_graphs.<key>``."""
    unknown = set(cfg) - set(DEFAULTS)
    if unknown:
        raise InputError(f"mir_graphs: unknown keys {sorted(unknown)}; expected some of {sorted(DEFAULTS)}")
    s = {**DEFAULTS, **cfg}
    if not isinstance(s["encoder"], str):
        raise InputError(f"mir_graphs.encoder: {s['encoder']!r} is not an encoder name")
    for key in POSITIVE + NON_NEGATIVE:
        least = 1 if key in POSITIVE else 0
        if not isinstance(s[key], int) or isinstance(s[key], bool) or s[key] < least:
            raise InputError(
                f"mir_graphs.{key}: {s[key]!r} is not a{' positive' if least else ' non-negative'} integer"
            )
    if not isinstance(s["overlap"], (int, float)) or isinstance(s["overlap"], bool) or not 0 <= s["overlap"] < 1:
        raise InputError(f"mir_graphs.overlap: {s['overlap']!r} is not a fraction in [0, 1)")
    if stride(s) < 1:
        raise InputError(
            f"mir_graphs.overlap: {s['overlap']!r} leaves a stride of 0 tokens for a window of {s['window']}"
        )
    labels = s["entity_labels"]
    if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
        raise InputError(f"mir_graphs.entity_labels: {labels!r} is not a list of spaCy NER labels")
    return s


def stride(settings: dict) -> int:
    """k = round(w·(1-α)) tokens between passage starts."""
    return round(settings["window"] * (1 - settings["overlap"]))


def word_spans(text: str) -> Iterator[tuple[int, int, str]]:
    """``(start, end, word)`` of each word of ``text``: a lower-cased run of letters and digits, neither of one
    character nor one of scikit-learn's English stop words."""
    for match in _WORD.finditer(text):
        word = match.group().lower()
        if word not in ENGLISH_STOP_WORDS:
            yield match.start(), match.end(), word


def words(text: str) -> list[str]:
    return [word for _, _, word in word_spans(text)]


def fit_tfidf(texts: Iterable[str]) -> TfidfVectorizer | None:
    """scikit-learn's TfidfVectorizer over ``words`` as fitted on ``texts`` (smoothed idf, L2-normalised rows),
    from document frequencies counted while streaming: ``fit`` would hold the whole collection's term matrix.
    None where the texts have no word at all."""
    df, n = Counter(), 0
    for text in texts:
        df.update(set(words(text)))
        n += 1
    if not df:
        return None
    vocabulary = sorted(df)
    vectorizer = TfidfVectorizer(analyzer=words, vocabulary={w: i for i, w in enumerate(vocabulary)})
    vectorizer.idf_ = np.log((1 + n) / (1 + np.array([df[w] for w in vocabulary], dtype=np.float64))) + 1
    return vectorizer


def passage_windows(n_tokens: int, window: int, stride: int, max_tokens: int) -> list[tuple[int, int]]:
    """``(start, end)`` token ranges of the passages over a document's first ``max_tokens`` of ``n_tokens``
    tokens: every ``stride`` tokens, ``window`` long, one more ending at the last token where the stride skips a
    tail; at least one (empty for an empty document)."""
    n = min(n_tokens, max_tokens)
    windows = [(s, min(s + window, n)) for s in range(0, max(n - window, 0) + 1, stride)]
    if windows[-1][1] < n:
        windows.append((n - window, n))
    return windows


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


def prf_words(
    queries: Mapping[str, str],
    run: Run,
    doc_texts: Mapping[str, str],
    depth: int,
    n_terms: int,
    leave_out: Mapping[str, Iterable[str]] = {},
) -> dict[str, list[str]]:
    """Each document's PRF words: the ``n_terms`` of highest Eq. 1 weight (ties alphabetical) that occur in its
    text as read (``doc_texts[doc_id]``); documents without any are left out."""
    out = {}
    for doc_id, weights in prf_weights(queries, run, depth, leave_out).items():
        if doc_id not in doc_texts:
            raise InputError(f"PRF queries: the run ranks document {doc_id!r}, which is not in the collection")
        present = set(words(doc_texts[doc_id]))
        ranked = sorted((w for w in weights if w in present), key=lambda w: (-weights[w], w))[:n_terms]
        if ranked:
            out[doc_id] = ranked
    return out


def p2p_edges(passage_texts: list[str], vectorizer: TfidfVectorizer | None, top_k: int) -> list[list[int]]:
    """Pairs [i, j] (i < j) where j is among i's ``top_k`` most tf-idf-cosine-similar other passages or i among
    j's (ties by index). Passages sharing no word (cosine 0) are never linked: such a link would carry no
    similarity, only the order of the passages."""
    if vectorizer is None or top_k == 0 or len(passage_texts) < 2:
        return []
    x = vectorizer.transform(passage_texts)
    sim = (x @ x.T).toarray()  # rows are L2-normalised: dot products are cosines
    pairs = set()
    for i in range(len(passage_texts)):
        others = sorted(
            (j for j in range(len(passage_texts)) if j != i and sim[i, j] > 0), key=lambda j: (-sim[i, j], j)
        )
        pairs.update((min(i, j), max(i, j)) for j in others[:top_k])
    return [list(p) for p in sorted(pairs)]


def _linked(groups: Iterable[list[int]]) -> list[list[int]]:
    """Every pair within each group of node indices, sorted, each once."""
    pairs = {p for group in groups for p in combinations(sorted(set(group)), 2)}
    return [list(p) for p in sorted(pairs)]


def _check_annotation(text: str, annotation: dict) -> None:
    bad = [s for s in annotation["sentences"] if not 0 <= s[0] <= s[1] <= len(text)]
    bad += [e for e in annotation["entities"] if not 0 <= e[0] <= e[1] <= len(text) or text[e[0] : e[1]] != e[3]]
    if bad:
        raise InputError(
            f"its annotation does not match its text (span {bad[0]} in a text of {len(text)} characters): "
            "annotated from another collection or with another max_words? re-run the annotate stage"
        )


def build_record(
    text: str, annotation: dict, prf_words: list[str], tokenizer, settings: dict, vectorizer: TfidfVectorizer | None
) -> dict:
    """The graph record of one document. ``text``: the text its ``annotation`` was made from
    (``annotate.cut_text``); ``prf_words``: its PRF words (none without a PRF set: entities only);
    ``settings``: checked by ``graph_settings``; ``vectorizer``: ``fit_tfidf`` on the collection."""
    _check_annotation(text, annotation)
    # split_special_tokens: a document's literal "[SEP]" stays text, so only our markers hold sep_token_id
    enc = tokenizer(
        text,
        add_special_tokens=False,
        return_offsets_mapping=True,
        truncation=True,
        max_length=settings["max_doc_tokens"],
        split_special_tokens=True,
    )
    ids, offsets = enc["input_ids"], enc["offset_mapping"]
    n = len(ids)
    starts, ends = [a for a, _ in offsets], [b for _, b in offsets]
    read = text[: ends[-1]] if n else ""
    sentence_starts = [start for start, _ in annotation["sentences"]]
    sentence_of = [max(bisect_right(sentence_starts, a) - 1, 0) for a in starts]

    # mentions as token ranges, entities first (a token goes to the first T node that claims it)
    labels = set(settings["entity_labels"])
    spans = [(a, b, "e:" + " ".join(t.lower().split())) for a, b, label, t in annotation["entities"] if label in labels]
    wanted = set(prf_words)
    spans += [(a, b, "w:" + w) for a, b, w in word_spans(read) if w in wanted]
    mentions = [
        (key, bisect_right(ends, a), bisect_left(starts, b)) for a, b, key in spans
    ]  # tokens overlapping [a, b)
    mentions = [(key, lo, hi) for key, lo, hi in mentions if lo < hi]
    keys_at: list[list[str]] = [[] for _ in range(n)]
    for key, lo, hi in mentions:
        for t in range(lo, hi):
            keys_at[t].append(key)

    sep = tokenizer.sep_token_id
    passages, sentences, piece_keys, tokens, texts = [], [], [], [], []
    for p, (start, end) in enumerate(
        passage_windows(n, settings["window"], stride(settings), settings["max_doc_tokens"])
    ):
        seq, position = [], {}
        for t in range(start, end):
            if t == start or sentence_of[t] != sentence_of[t - 1]:  # a sentence piece begins
                sentences.append([p, len(seq)])
                piece_keys.append(set())
                seq.append(sep)
            piece_keys[-1].update(keys_at[t])
            position[t] = len(seq)
            seq.append(ids[t])
        if not seq:  # an empty document: one passage holding a lone [SNT]
            sentences.append([p, 0])
            piece_keys.append(set())
            seq.append(sep)
        passages.append(seq)
        texts.append(text[starts[start] : ends[end - 1]] if end > start else "")
        claimed: set[int] = set()
        for key, lo, hi in mentions:
            inside = range(max(lo, start), min(hi, end))
            if inside and not claimed.intersection(inside):
                claimed.update(inside)
                tokens.append((p, [position[t] for t in inside], key))
    tokens.sort(key=lambda node: (node[0], node[1][0]))  # document order (entities were taken first)

    sentences = sentences[: settings["max_sentence_nodes"]]
    tokens = tokens[: settings["max_token_nodes"]]
    by_key: dict[str, list[int]] = defaultdict(list)
    for i, (_, _, key) in enumerate(tokens):
        by_key[key].append(i)
    sharing: dict[str, list[int]] = defaultdict(list)
    for i, keys in enumerate(piece_keys[: len(sentences)]):
        for key in keys:
            sharing[key].append(i)
    return {
        "passages": passages,
        "sentences": sentences,
        "tokens": [[p, pos] for p, pos, _ in tokens],
        "token_keys": [key for _, _, key in tokens],
        "edges": {
            "p2p": p2p_edges(texts, vectorizer, settings["p2p_top_k"]),
            "s2s": _linked(sharing.values()),
            "t2t": _linked(by_key.values()),
        },
        "n_tokens": n,
    }


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


def _summary(values: list[float]) -> dict:
    return {
        "mean": float(np.mean(values)) if values else 0.0,
        "p90": float(np.percentile(values, 90)) if values else 0.0,
    }


def build(
    corpus: Corpus,
    annotations: Annotations,
    prf_dir: str | Path | None,
    cfg: dict,
    out: Path,
    prf_leave_out: Mapping[str, Iterable[str]] = {},
) -> dict:
    from longrank.models.modules.encoders import load_tokenizer

    s = graph_settings(cfg)
    tokenizer = load_tokenizer(s["encoder"])
    if not tokenizer.is_fast:
        raise InputError(f"mir_graphs.encoder: {s['encoder']!r} has no fast tokenizer (character offsets are needed)")
    docs, max_words = corpus.docs, annotations.max_words
    begin = time.perf_counter()
    vectorizer = fit_tfidf(
        cut_text(text, max_words)
        for text in progress(docs.values(), total=len(docs), desc="graphs: tf-idf", unit="doc", mininterval=5)
    )
    prf = {}
    if prf_dir is not None:
        queries, run = read_prf_queries(prf_dir)
        prf = prf_words(
            queries,
            run,
            _ReadTexts(docs, max_words, tokenizer, s["max_doc_tokens"]),
            s["prf_depth"],
            s["prf_terms"],
            prf_leave_out,
        )
    seconds, counts = [], defaultdict(list)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        with RecordWriter(staging / GRAPHS, "graphs") as writer:
            for doc_id, text in progress(docs.items(), total=len(docs), desc="graphs", unit="doc", mininterval=5):
                annotation = annotations[doc_id]
                start = time.perf_counter()
                try:
                    record = build_record(
                        cut_text(text, max_words), annotation, prf.get(doc_id, []), tokenizer, s, vectorizer
                    )
                except InputError as err:
                    raise InputError(f"document {doc_id!r}: {err}") from None
                seconds.append(time.perf_counter() - start)
                writer.add(doc_id, record)
                for view in ("passages", "sentences", "tokens"):
                    counts[view].append(len(record[view]))
                for view, edges in record["edges"].items():
                    counts[view].append(len(edges))
        n = len(seconds)
        stats = {
            "documents": n,
            "seconds": time.perf_counter() - begin,
            "annotations": str(annotations.path.parent),
            "max_words": max_words,
            "prf_queries": None if prf_dir is None else str(prf_dir),
            "prf_documents": len(prf),
            "construction_seconds_per_document": {**_summary(seconds), "max": max(seconds, default=0.0)},
            "nodes": {view: _summary(counts[view]) for view in ("passages", "sentences", "tokens")},
            "edges": {view: _summary(counts[view]) for view in ("p2p", "s2s", "t2t")},
            # a capped count is below its cap exactly when the uncapped one is
            "under_cap": {
                "sentences": float(np.mean([c < s["max_sentence_nodes"] for c in counts["sentences"]])) if n else 1.0,
                "tokens": float(np.mean([c < s["max_token_nodes"] for c in counts["tokens"]])) if n else 1.0,
            },
        }
        write_json(
            staging / SETTINGS,
            {
                **s,
                "cls_id": tokenizer.cls_token_id,
                "sep_id": tokenizer.sep_token_id,
                "pad_id": tokenizer.pad_token_id,
                "vocab_size": tokenizer.vocab_size,
            },
        )
        write_json(staging / "stats.json", stats)
        staging.chmod(umask_mode(0o777))  # mkdtemp makes it 0700: others in a shared results tree could not read it
        replace_directory(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log.info(
        "graphs: %d documents in %.0f s (%.1f ms each); per document %.1f passages, %.1f sentence and %.1f token "
        "nodes; %.0f%% / %.0f%% under the sentence / token caps",
        n,
        stats["seconds"],
        1000 * stats["construction_seconds_per_document"]["mean"],
        stats["nodes"]["passages"]["mean"],
        stats["nodes"]["sentences"]["mean"],
        stats["nodes"]["tokens"]["mean"],
        100 * stats["under_cap"]["sentences"],
        100 * stats["under_cap"]["tokens"],
    )
    return stats


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
    parser.add_argument("--out", required=True, help="the graph set's directory")


def pretraining_inputs(
    data: str | Path, pseudo_dir: str | Path, annotations: Annotations, prf_dir: str | Path | None
) -> tuple[Corpus, dict[str, set[str]]]:
    """The collection as pre-training on a pseudo-query set reads it, and the PRF pairs to leave out.

    Pre-training reads each pseudo-query's positive without the text the query came from (``overrides.jsonl``), so
    that a model cannot find the query copied verbatim; MIR reads records, not text, so its graphs must be cut from
    those texts too: they are annotated afresh. Where the PRF terms come from the same set, a positive's own
    pseudo-query is left out of its Eq. 1 weights, or its pivots would mark the query's words in it."""
    from longrank.data.corpus import PseudoQueryCorpus

    corpus = PseudoQueryCorpus(data, pseudo_dir)
    annotations.reannotate(corpus.docs.overrides)
    leave_out: dict[str, set[str]] = {}
    if prf_dir is not None and Path(prf_dir).resolve() == Path(pseudo_dir).resolve():
        for qid, judged in corpus.qrels.items():
            leave_out[qid] = {d for d, gain in judged.items() if gain > 0}
    return corpus, leave_out


def run(args) -> None:
    cfg = read_config(args.config, "graphs")
    graph_settings(cfg)  # a bad setting fails before anything is read
    annotations = Annotations(args.annotations)
    corpus, leave_out = Corpus(args.data), {}
    if args.pretrain_queries:
        corpus, leave_out = pretraining_inputs(args.data, args.pretrain_queries, annotations, args.prf_queries)
    build(corpus, annotations, args.prf_queries, cfg, Path(args.out), leave_out)
