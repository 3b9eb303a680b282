"""Stage ``word2vec``: word vectors trained on the prepared collection, IN and OUT embeddings concatenated.

The Conformer-Kernel paper (Mitra et al., NDRM, Sec. 4 "Model training") pre-trains word2vec on the collection
and initialises the embedding layer with "a concatenation of the IN and OUT embeddings (Nalisnick et al., 2016;
Mitra et al., 2016)". IN is word2vec's input matrix (gensim ``wv.vectors``), OUT its output matrix, which with
negative sampling is gensim's ``syn1neg``; a word's vector here is IN ‖ OUT (2 × ``dim`` values).

Choices, stated:
- **CBOW with negative sampling** (``sg=0, hs=0, negative=5``): the Dual Embedding Space Model (Mitra et al.
  2016, the paper the IN+OUT initialisation cites) trains word2vec's CBOW architecture and reads IN and OUT off
  it: CBOW pulls a word's context words' IN vectors towards its OUT vector, so IN·OUT measures topical
  co-occurrence ("aboutness"), which is what query-term / document-term matching wants. Negative sampling
  because the OUT vectors must be per word: hierarchical softmax's output matrix has one row per tree node, not
  per word. (The CK paper ran fastText's word2vec, whose defaults are the gensim defaults used here: 5
  negatives, window 5, 5 epochs, dimension 100.)
- **Skip-gram** (``architecture: skipgram``, ``sg=1``) is the Conformer-Kernel authors' code instead: fastText
  ``train_unsupervised(model='skipgram', ws=10, minCount=100, maxn=0, epoch=5)``, which with ``maxn=0`` has no
  character n-grams (fastText then sets its bucket count to 0), so it is word2vec skip-gram with negative
  sampling; gensim's ``Word2Vec(sg=1)`` trains that same model, deterministically (one worker, a seed), with no
  new dependency, where the ``fasttext`` package's threads make its vectors differ run to run, and gensim's
  ``FastText`` with ``max_n=0`` is Word2Vec again. fastText's own defaults, which the authors keep, differ from
  gensim's in two numbers, so both are keys: ``sample`` (fastText's ``t`` 1e-4, gensim 1e-3) and ``alpha`` (the
  start learning rate: fastText's skip-gram 0.05, gensim 0.025). NDRM's full-scale configs take all of these.
- Text: ``data/docs.jsonl``, processed as ``processing`` says (``longrank.data.words.analyzer``): ``words``, as the
  word models tokenise (``longrank.data.words.tokenize``: lower-cased ``\\w+`` runs), so every vector's key is a
  key of the models' vocabulary; ``ck``, the Conformer-Kernel authors' processing (their stop words removed,
  Krovetz stems), for NDRM's ``text_processing: ck``. ``doc_fields`` reads a document as a model entry's
  ``doc_fields`` does (``data.doc_field.DocumentFields``: the URL before the collection's title and body, as the
  authors' fastText and IDF table read it); the document frequencies count those fields. ``training_queries``
  adds the training queries' text, a sentence each, after the documents (the authors' fastText reads MS MARCO's
  training queries too): vectors only, no document frequency, and never a dev or test query, so one split only
  (the config check refuses it with k folds, where every query is some fold's test query). A document is one
  sentence; longer
  ones are cut into pieces of gensim's ``MAX_WORDS_IN_BATCH`` (10,000) words, because gensim silently drops the
  words of a sentence beyond that.
- Deterministic: one worker thread and a seed (gensim seeds its vectors from ``seed`` and draws negatives from
  a seeded generator; with ``workers=1`` the batches and their order are fixed too), so the same collection and
  keys give the same file byte for byte.
- Output: word2vec text format (``n_words width`` header, then ``word v1 ... v_width`` per line, vocabulary in
  gensim's order: frequency, descending), read by ``embeddings: word2vec`` (``models/modules/word_embedder.py``);
  beside it ``word2vec_doc_freq.tsv``, each processed term's document frequency (``words.write_doc_freq``'s
  format, every term, not only those with a vector: the vocabulary and IDF of a model whose processing is not
  the data stage's), and ``word2vec.json``, the keys it was built with (``processing`` above all: a model checks
  that the vectors' terms are its terms).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from collections.abc import Iterator

import numpy as np

from collections import Counter

from longrank.data.words import analyzer, write_doc_freq
from longrank.errors import InputError
from longrank.io.atomic import atomic_path
from longrank.io.json_yaml import write_json
from longrank.config.schema import schema_default

log = logging.getLogger(__name__)

#: the file the stage writes into the data directory and ``embeddings: word2vec`` reads from it
FILE_NAME = "word2vec.txt"
#: written beside it: the processed terms' document frequencies, and the keys the vectors were built with
DOC_FREQ_FILE, META_FILE = "word2vec_doc_freq.tsv", "word2vec.json"
ARCHITECTURES = {"cbow": 0, "skipgram": 1}


class DocumentSentences:
    """The collection's documents as token lists, read again on every pass (gensim iterates once to build the
    vocabulary and once per epoch), so memory holds one document at a time. The first pass also counts each
    term's document frequency (``doc_freq``, with the document count under ``words._NUM_DOCS``). ``fields`` (a
    ``data.doc_field.DocumentFields``) puts a document's other fields around its text; ``queries``, texts read after
    the documents on every pass and counted in no document frequency."""

    def __init__(
        self,
        docs_path: Path,
        max_words: int,
        processing: str = schema_default("word2vec.processing"),
        fields=None,
        queries=(),
    ):
        self.docs_path, self.max_words = Path(docs_path), max_words
        self.analyze = analyzer(processing)
        self.fields, self.queries = fields, list(queries)
        self.doc_freq: Counter | None = None

    def __iter__(self) -> Iterator[list[str]]:
        from longrank.data.words import _NUM_DOCS

        counting = self.doc_freq is None
        df: Counter = Counter()
        with open(self.docs_path, encoding="utf-8") as f:
            for line in f:
                doc = json.loads(line)
                text = self.fields.texts([doc["doc_id"]], [doc["text"]])[0] if self.fields else doc["text"]
                tokens = self.analyze(text)
                if counting:
                    df.update(set(tokens))
                    df[_NUM_DOCS] += 1
                yield from self._pieces(tokens)
        for query in self.queries:
            yield from self._pieces(self.analyze(query))
        if counting:
            self.doc_freq = df

    def _pieces(self, tokens: list[str]) -> Iterator[list[str]]:
        for start in range(0, len(tokens), self.max_words):
            yield tokens[start : start + self.max_words]


def train_word2vec(
    docs_path: Path,
    dim: int = schema_default("word2vec.dim"),
    window: int = schema_default("word2vec.window"),
    epochs: int = schema_default("word2vec.epochs"),
    min_count: int = schema_default("word2vec.min_count"),
    seed: int = schema_default("word2vec.seed"),
    negative: int = 5,
    architecture: str = schema_default("word2vec.architecture"),
    processing: str = schema_default("word2vec.processing"),
    sample: float = schema_default("word2vec.sample"),
    alpha: float = schema_default("word2vec.alpha"),
    sentences: DocumentSentences | None = None,
):
    """A gensim Word2Vec (CBOW or skip-gram) with negative sampling trained on ``docs_path`` (module docstring).
    ``sentences``: the corpus iterator to use (its ``doc_freq`` is filled by the first pass)."""
    if architecture not in ARCHITECTURES:
        raise InputError(f"word2vec: architecture {architecture!r} is not one of {list(ARCHITECTURES)}")
    from gensim.models import Word2Vec
    from gensim.models.word2vec import MAX_WORDS_IN_BATCH

    sentences = sentences or DocumentSentences(docs_path, MAX_WORDS_IN_BATCH, processing)
    model = Word2Vec(
        vector_size=dim,
        window=window,
        min_count=min_count,
        sg=ARCHITECTURES[architecture],
        hs=0,
        negative=negative,
        workers=1,
        seed=seed,
        epochs=epochs,
        sample=sample,
        alpha=alpha,
    )
    model.build_vocab(sentences)
    if not len(model.wv):
        raise InputError(f"word2vec: no word of {docs_path} occurs min_count={min_count} times or more")
    log.info(
        "word2vec: %d words (min_count %d) from %d sentences, %d tokens",
        len(model.wv),
        min_count,
        model.corpus_count,
        model.corpus_total_words,
    )
    model.train(
        sentences,
        total_examples=model.corpus_count,
        total_words=model.corpus_total_words,
        epochs=epochs,
        callbacks=[_epoch_logger(epochs)],
    )
    return model


def _epoch_logger(epochs: int):
    """A gensim callback that logs each finished epoch of ``epochs`` and the time since it was made."""
    from gensim.models.callbacks import CallbackAny2Vec

    class Progress(CallbackAny2Vec):
        def __init__(self):
            self.epoch, self.started = 0, time.perf_counter()

        def on_epoch_end(self, model):
            self.epoch += 1
            log.info("word2vec: epoch %d/%d done (%.1f s)", self.epoch, epochs, time.perf_counter() - self.started)

    return Progress()


def in_out_vectors(model) -> tuple[list[str], np.ndarray]:
    """(words, [n_words, 2 × dim] float32): each word's IN vector followed by its OUT (``syn1neg``) vector."""
    return list(model.wv.index_to_key), np.hstack([model.wv.vectors, model.syn1neg]).astype(np.float32)


def write_word2vec_text(path: Path, words: list[str], vectors: np.ndarray) -> None:
    """word2vec text format, 7 significant digits (float32's precision: relative error below 1e-7)."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(f"{len(words)} {vectors.shape[1]}\n")
        for word, row in zip(words, vectors):
            f.write(word + " " + " ".join(f"{v:.7g}" for v in row.tolist()) + "\n")


def build(
    docs_path: Path,
    out: Path,
    doc_fields: list[str] | None = None,
    training_queries: bool = schema_default("word2vec.training_queries"),
    **keys,
) -> None:
    """The stage: vectors of ``docs_path``'s documents (read through ``doc_fields`` when given) and, with
    ``training_queries``, of the training queries of the prepared data beside it; their files beside ``out``."""
    if not Path(docs_path).is_file():
        raise InputError(f"word2vec: {docs_path} not found (the data stage writes it)")
    from gensim.models.word2vec import MAX_WORDS_IN_BATCH

    from longrank.data.doc_field import DocumentFields
    from longrank.data.words import _NUM_DOCS

    data = Path(docs_path).parent
    fields = DocumentFields(data, doc_fields, "word2vec.doc_fields") if doc_fields else None
    queries = training_query_texts(data) if training_queries else []
    started = time.perf_counter()
    sentences = DocumentSentences(
        Path(docs_path),
        MAX_WORDS_IN_BATCH,
        keys.get("processing", schema_default("word2vec.processing")),
        fields,
        queries,
    )
    words, vectors = in_out_vectors(train_word2vec(Path(docs_path), sentences=sentences, **keys))
    write_word2vec_text(Path(out), words, vectors)
    doc_freq = sentences.doc_freq
    assert doc_freq is not None, "training read the documents, and the first pass counts them"
    num_docs = doc_freq[_NUM_DOCS]
    write_doc_freq(Path(out).parent / DOC_FREQ_FILE, doc_freq)
    write_json(
        Path(out).parent / META_FILE,
        {
            **keys,
            "doc_fields": doc_fields,
            "training_queries": len(queries),
            "num_docs": num_docs,
            "words": len(words),
            "width": int(vectors.shape[1]),
        },
    )
    log.info(
        "word2vec: wrote %d vectors of %d values (IN ‖ OUT) to %s in %.1f s",
        len(words),
        vectors.shape[1],
        out,
        time.perf_counter() - started,
    )


def training_query_texts(data: Path) -> list[str]:
    """The texts of the one split's training queries (``folds.json``: the config check allows training_queries with
    one fold only), in the order the split lists them."""
    from longrank.data.corpus import Corpus

    corpus = Corpus(data)
    if len(corpus.folds) != 1:
        raise InputError(
            f"word2vec.training_queries: {data / 'folds.json'} holds {len(corpus.folds)} folds; the vectors are built "
            "once per collection, so only one split's training queries can be read (every query is some fold's test)"
        )
    return [corpus.queries[q] for q in corpus.folds[0]["train"]]


def add_arguments(parser):
    import inspect

    defaults = {
        k: p.default for k, p in inspect.signature(train_word2vec).parameters.items() if p.default is not p.empty
    }
    parser.add_argument("--docs", required=True, help="results/{dataset}/data/docs.jsonl")
    parser.add_argument(
        "--dim",
        type=int,
        default=defaults["dim"],
        help="size of the IN and of the OUT vectors (each word gets 2 x dim)",
    )
    parser.add_argument("--window", type=int, default=defaults["window"], help="context words on each side")
    parser.add_argument("--epochs", type=int, default=defaults["epochs"])
    parser.add_argument(
        "--min-count",
        type=int,
        default=defaults["min_count"],
        help="words rarer than this in the collection get no vector",
    )
    parser.add_argument("--seed", type=int, default=defaults["seed"])
    parser.add_argument(
        "--architecture",
        choices=list(ARCHITECTURES),
        default=defaults["architecture"],
        help="cbow (DESM's) or skipgram (the Conformer-Kernel authors' fastText skip-gram)",
    )
    parser.add_argument(
        "--processing",
        default=defaults["processing"],
        help="text processing: words (the word models' tokens) or ck (the CK authors': stop words, Krovetz)",
    )
    parser.add_argument(
        "--sample", type=float, default=defaults["sample"], help="down-sampling threshold of frequent words"
    )
    parser.add_argument("--alpha", type=float, default=defaults["alpha"], help="initial learning rate")
    parser.add_argument(
        "--doc-fields",
        type=json.loads,
        default=None,
        help="the fields a document is read as (JSON list, a model's doc_fields; null: docs.jsonl's text)",
    )
    parser.add_argument(
        "--training-queries", action="store_true", help="train on the training queries' text too (after the documents)"
    )
    parser.add_argument("--out", required=True, help=f"results/{{dataset}}/data/{FILE_NAME}")


def run(args):
    for key in ("dim", "window", "epochs", "min_count"):
        if getattr(args, key) < 1:
            raise InputError(f"word2vec: --{key.replace('_', '-')} must be at least 1, got {getattr(args, key)}")
    analyzer(args.processing)  # an unknown name is an InputError before any work
    build(
        Path(args.docs),
        Path(args.out),
        doc_fields=args.doc_fields,
        training_queries=args.training_queries,
        dim=args.dim,
        window=args.window,
        epochs=args.epochs,
        min_count=args.min_count,
        seed=args.seed,
        architecture=args.architecture,
        processing=args.processing,
        sample=args.sample,
        alpha=args.alpha,
    )
