"""BM25 first stage through PISA (``pyterrier-pisa``, a C++ engine): the ``pisa`` method of ``first_stages``, for a
collection that does not fit in memory (bm25s holds its index in RAM: ~106 GB for MS MARCO's 3.2M documents by
``benchmarks/scaling.py``; docs/studies/scaling.md).

Two steps, each its own stage:

- ``pisa_index`` (:mod:`longrank.retrieval.pisa_index`, rule ``pisa_index``): the index of the collection, built once
  per collection and index settings (the stemmer and BM25's k1 and b) by streaming ``docs.jsonl`` into PISA; a
  complete index holds :data:`MANIFEST`, written last.
- ``candidates`` (:func:`retrieve`): the top ``depth`` documents of every query, read from the index; nothing is
  written into it. Stop words are query-time in PISA (every term is indexed), so changing them reuses the index.

Text processing is PISA's own, and differs from the ``bm25`` method's (bm25s): PISA splits on every character that is
not an ASCII letter or digit (``naïve`` -> ``na ve``, ``e-mail`` -> ``e mail``, ``U.S.`` -> ``us``) and keeps
one-character tokens; bm25s keeps runs of two or more Unicode word characters (``naïve``, ``ca_t``) and drops single
characters. Both stem with Porter2 (Snowball English; PISA also offers Krovetz) and drop Lucene's 33 English stop
words by default, but PISA counts stop words in a document's length (they are indexed), bm25s does not. PISA's IDF is
``max(1e-6, ln((N - df + 0.5) / (df + 0.5)))``, Lucene's (bm25s) ``ln(1 + (N - df + 0.5) / (df + 0.5))``: a term in
more than half the documents scores ~0 in PISA. Block-max WAND returns the exact top k. docs/first-stages.md gives
the measured agreement on Cranfield and IRLeD.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from longrank.errors import InputError
from longrank.io.json_yaml import read_json
from longrank.io.trec_files import Run

log = logging.getLogger(__name__)

METHOD = "pisa"
#: the first_stages[] keys this method reads (besides name, method and top_k)
KEYS = {"k1", "b", "stemmer", "stopwords", "analyser"}
STEMMERS = ("porter2", "krovetz", None)
STOPWORD_LISTS = ("lucene", "terrier", None)
#: bm25s: the bm25 method's text processing, in Python, before PISA sees the text; pisa: PISA's own, in C++
ANALYSERS = ("bm25s", "pisa")
#: the bm25 method's tokens (bm25s's default token pattern, over lower-cased text)
_BM25S_TOKEN = re.compile(r"(?u)\b\w\w+\b")
#: written last into a complete index: the settings it was built with, the collection it was built from, its cost
MANIFEST = "longrank_pisa.json"
MANIFEST_FORMAT = 1
#: PISA's postings codec and query algorithm (pyterrier-pisa's defaults; block-max WAND is exact for top k)
ENCODING = "block_simdbp"
QUERY_ALGORITHM = "block_max_wand"


@dataclass(frozen=True)
class PisaSettings:
    """A ``pisa`` first stage's settings (schema: ``first_stages[].k1 / b / stemmer / stopwords / analyser``)."""

    k1: float = 0.9
    b: float = 0.4
    stemmer: str | None = "porter2"
    stopwords: str | None = "lucene"
    analyser: str = "bm25s"

    @classmethod
    def from_spec(cls, spec: dict, where: str) -> PisaSettings:
        """The settings of a first-stage entry; a bad value is an InputError naming ``<where>.<key>``."""
        defaults = cls()
        values = {key: spec.get(key, getattr(defaults, key)) for key in KEYS}
        for key in ("k1", "b"):
            value = values[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise InputError(f"config key {where}.{key}: {value!r} is not a number >= 0")
        if values["b"] > 1:
            raise InputError(
                f"config key {where}.b: {values['b']!r} is over 1 (b is a fraction of length normalisation)"
            )
        if values["stemmer"] not in STEMMERS:
            raise InputError(
                f"config key {where}.stemmer: {values['stemmer']!r} is not one of PISA's stemmers {list(STEMMERS)} "
                "(porter2 is Snowball English, the bm25 method's 'english')"
            )
        if values["stopwords"] not in STOPWORD_LISTS:
            raise InputError(
                f"config key {where}.stopwords: {values['stopwords']!r} is not one of {list(STOPWORD_LISTS)} "
                "(lucene: the 33 words of bm25s's 'en'; terrier: Terrier's 733)"
            )
        if values["analyser"] not in ANALYSERS:
            raise InputError(f"config key {where}.analyser: {values['analyser']!r} is not one of {list(ANALYSERS)}")
        if values["analyser"] == "bm25s" and values["stemmer"] == "krovetz":
            raise InputError(
                f"config key {where}.stemmer: krovetz is PISA's own; it needs analyser: pisa (bm25s stems with Snowball)"
            )
        if values["analyser"] == "bm25s" and values["stopwords"] == "terrier":
            raise InputError(f"config key {where}.stopwords: terrier is PISA's own list; it needs analyser: pisa")
        return cls(
            k1=float(values["k1"]),
            b=float(values["b"]),
            stemmer=values["stemmer"],
            stopwords=values["stopwords"],
            analyser=values["analyser"],
        )

    def index_settings(self) -> dict:
        """What the index is built for: a change in any of these needs a new index. PISA removes stop words from
        queries only, so they are not an index setting with its own analyser; the bm25s analyser removes them from
        documents too (a document's length counts its other words, as bm25s's does)."""
        settings = {"analyser": self.analyser, "stemmer": self.stemmer, "k1": self.k1, "b": self.b}
        if self.analyser == "bm25s":
            settings["stopwords"] = self.stopwords
        return {**settings, "encoding": ENCODING}

    def engine_stemmer(self) -> str:
        """The stemmer PISA applies: none where the bm25s analyser stemmed already."""
        return "none" if self.analyser == "bm25s" or self.stemmer is None else self.stemmer

    def engine_stopwords(self) -> str:
        """The stop words PISA removes from queries: none where the bm25s analyser removed them already."""
        return "none" if self.analyser == "bm25s" or self.stopwords is None else self.stopwords


class Bm25sAnalyser:
    """The bm25 method's text processing (bm25s.tokenize): lower-cased runs of two or more word characters, stop
    words out, then Snowball English stems. PISA indexes its output with its own processing off, so documents'
    lengths, terms and query term counts are bm25s's. ``None`` of settings with analyser pisa: PISA's own."""

    def __init__(self, settings: PisaSettings):
        import bm25s.stopwords
        import Stemmer

        self.stop_words = set(bm25s.stopwords.STOPWORDS_EN) if settings.stopwords == "lucene" else set()
        self.stem = Stemmer.Stemmer("english").stemWords if settings.stemmer == "porter2" else list

    def __call__(self, text: str) -> str:
        return " ".join(self.stem([w for w in _BM25S_TOKEN.findall(text.lower()) if w not in self.stop_words]))

    @staticmethod
    def of(settings: PisaSettings):
        return Bm25sAnalyser(settings) if settings.analyser == "bm25s" else None


def engine():
    """pyterrier_pisa, or an InputError saying how to install it."""
    try:
        import pyterrier_pisa
    except ImportError:
        raise InputError(
            "first stage method pisa needs pyterrier-pisa: pip install -e '.[pisa]' (docs/first-stages.md)"
        ) from None
    return pyterrier_pisa


# --- retrieving ----------------------------------------------------------------------------------------------
def read_manifest(index_dir: Path, settings: PisaSettings, docs_path: Path | None = None) -> dict:
    """The manifest of a complete index built for ``settings`` (and, given ``docs_path``, from a collection of that
    file's size); anything else is an InputError saying what to rebuild."""
    index_dir = Path(index_dir)
    path = index_dir / MANIFEST
    if not path.exists():
        raise InputError(
            f"{index_dir}: not a complete PISA index (no {MANIFEST}; an interrupted build leaves none): "
            "build it again with the pisa_index stage"
        )
    manifest = read_json(path)
    if manifest.get("format") != MANIFEST_FORMAT or manifest.get("settings") != settings.index_settings():
        raise InputError(
            f"{index_dir}: built for {manifest.get('settings')}, but the first stage asks for "
            f"{settings.index_settings()}: build it again with the pisa_index stage"
        )
    if docs_path is not None and Path(docs_path).stat().st_size != manifest["collection"]["size"]:
        raise InputError(
            f"{index_dir}: built from a collection of {manifest['collection']['size']} bytes, but {docs_path} has "
            f"{Path(docs_path).stat().st_size}: the collection changed; build the index again"
        )
    return manifest


def retrieve(
    index_dir: Path, queries: dict[str, str], settings: PisaSettings, depth: int, docs_path: Path | None = None
) -> tuple[Run, dict]:
    """Every query's top ``depth`` documents by BM25 from the index at ``index_dir`` (queries go through PISA's own
    tokeniser, stemmer and the stop words of ``settings``), and what it cost for the report."""
    import pandas as pd

    pyterrier_pisa = engine()
    manifest = read_manifest(index_dir, settings, docs_path)
    started = time.perf_counter()
    index = pyterrier_pisa.PisaIndex(
        str(index_dir), stemmer=settings.engine_stemmer(), stops=settings.engine_stopwords(), threads=1
    )
    # query_weighted: a word twice in the query counts twice, as in bm25s (PISA's default counts each term once)
    retriever = index.bm25(
        k1=settings.k1, b=settings.b, num_results=depth, query_algorithm=QUERY_ALGORITHM, query_weighted=True
    )
    loaded = time.perf_counter()
    qids = sorted(queries)
    analyse = Bm25sAnalyser.of(settings) or (lambda text: text)
    results = retriever.transform(pd.DataFrame({"qid": qids, "query": [analyse(queries[q]) for q in qids]}))
    done = time.perf_counter()
    run: Run = {}
    for qid, docno, score in zip(results["qid"], results["docno"], results["score"]):
        run.setdefault(qid, {})[docno] = float(score)
    empty = [q for q in qids if q not in run]
    if empty:
        log.warning(
            "%d queries have no PISA candidate (no query term is in the index after PISA's tokeniser, stemmer and "
            "stop words): %s",
            len(empty),
            ", ".join(empty[:10]),
        )
    return run, {
        "index_seconds": manifest["index_seconds"],
        "index_bytes": manifest["index_bytes"],
        "documents": manifest["documents"],
        "load_seconds": loaded - started,
        "query_seconds": done - loaded,
        "query_ms_per_query": 1000 * (done - loaded) / max(1, len(qids)),
    }


def candidates(stage, corpus, depth: int, artifacts: Sequence[Path]) -> tuple[Run, dict]:
    """The ``pisa`` first stage ``stage`` (a parsed :class:`~longrank.retrieval.first_stage.FirstStage`) over a
    prepared corpus, from its index (the one artifact)."""
    if len(artifacts) != 1:
        raise InputError(
            f"first stage {stage.name!r} (method pisa): give its index directory "
            "(--artifacts results/{dataset}/pisa/{name}, built by the pisa_index stage)"
        )
    return retrieve(artifacts[0], corpus.queries, stage.settings, depth, docs_path=corpus.dir / "docs.jsonl")
