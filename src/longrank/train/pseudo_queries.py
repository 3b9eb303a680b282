"""Stage ``pseudo_queries``: training queries made from the documents alone, for pre-training the re-rankers
(``train.pretrain``) where the collection has too few real training queries (Cranfield: 120, IRLeD: 80).

A set is configured by name under ``pseudo_queries:`` in the config and built once per collection:

- ``source: titles``: a document's title (``title_field``, read from the source collection) is the query and the
  rest of the document the positive (the BERT-era trial that lifted a MiniLM cross-encoder on Cranfield by +0.11);
- ``source: ict``: the Inverse Cloze Task (Lee et al., 2019): a random span of ``query_words`` words is the query
  and its document, with the span taken out, the positive;
- ``source: formulated``: the collection's own query formulation (``query_formulation`` of the config) applied to
  a random passage of ``passage_words`` words (IRLeD: its top-25 tf-idf terms, as IRLeD's queries are formed from
  a whole case), the document without that passage the positive.

Short documents (abstracts of ~40 words under IRLeD's ``passage_words: 300``): a span or passage is at most half
of its document, so that its positive keeps at least as many words as the query came from. A document shorter than
twice the configured length gives a span of half its words, drawn from a second seeded stream (documents long
enough draw exactly the spans they drew before short ones were admitted); ``stats.json`` counts them
(``shortened``) and the log says so. A document of fewer than two words gives no pseudo-query. Where no more than
one pseudo-query is left (every document too short, or every one filtered), the stage stops with an ``InputError``
naming the setting (``pseudo_queries.<name>.passage_words`` / ``query_words`` / ``title_field``) and the
collection's median words per document: a set of zero or one queries cannot pre-train or weight anything.

In every source the text the query came from is taken out of its positive (``overrides.jsonl``: the positive's
text as pre-training reads it), so a model cannot learn to find the query copied verbatim. Documents are drawn
without replacement (``count`` of them, ``seed``), so each document has at most one such text. Negatives come
from each pseudo-query's BM25 top ``depth`` (``candidates.run``), as for real queries. No pseudo-query contains
a real query's text (any real query: test, dev or train), and ``drop_easy`` drops those whose positive BM25
already ranks first. BM25 is bm25s over the collection in memory, or, with ``first_stage: <name>``, that ``pisa``
first stage's on-disk index (its settings and index: a collection larger than memory, MS MARCO's 3.2M documents). ``dev`` of them are held out for early stopping of the pre-training.

Output directory: ``queries.tsv``, ``qrels.txt``, ``folds.json`` (one fold: train and dev pseudo-queries, no
test), ``candidates.run``, ``overrides.jsonl``, ``stats.json``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
import logging
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np

from longrank.data.collections import read_field
from longrank.data.corpus import Corpus
from longrank.data.queries import formulate
from longrank.errors import InputError
from longrank.io.atomic import names_full_disk, replace_directory, umask_mode, write_text
from longrank.io.json_yaml import write_json
from longrank.io.trec_files import write_qrels, write_run
from longrank.config.schema import schema_default, schema_defaults

log = logging.getLogger(__name__)

SOURCES = ("titles", "ict", "formulated")


@dataclass(frozen=True)
class PseudoQuerySettings:
    """A pseudo-query set (``pseudo_queries.<set>``), its defaults the schema's (the one home of them)."""

    source: str = schema_default("pseudo_queries.*.source")
    count: int = schema_default("pseudo_queries.*.count")
    seed: int = schema_default("pseudo_queries.*.seed")
    query_words: int = schema_default("pseudo_queries.*.query_words")
    passage_words: int = schema_default("pseudo_queries.*.passage_words")
    title_field: str = schema_default("pseudo_queries.*.title_field")
    depth: int = schema_default("pseudo_queries.*.depth")
    dev: float = schema_default("pseudo_queries.*.dev")
    drop_easy: bool = schema_default("pseudo_queries.*.drop_easy")
    # BM25 from this pisa first stage's index (None: bm25s in memory); a set without it is configured, and writes its
    # stats, exactly as before the key existed
    first_stage: str | None = None

    def to_json(self) -> dict:
        """As the set's stats.json records it (``first_stage`` only where the set names one)."""
        return {k: v for k, v in asdict(self).items() if k != "first_stage" or v is not None}


KEYS = tuple(f.name for f in fields(PseudoQuerySettings))


def settings(name: str, cfg: dict) -> PseudoQuerySettings:
    """The set's configuration with defaults, checked: errors name ``pseudo_queries.<name>.<key>``."""
    unknown = set(cfg) - set(KEYS)
    if unknown:
        raise InputError(f"pseudo_queries.{name}: unknown keys {sorted(unknown)}; expected some of {sorted(KEYS)}")
    out = PseudoQuerySettings(**cfg)
    if out.source not in SOURCES:
        raise InputError(f"pseudo_queries.{name}.source: {out.source!r} is not one of {list(SOURCES)}")
    for key in ("count", "query_words", "passage_words", "depth"):
        value = getattr(out, key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InputError(f"pseudo_queries.{name}.{key}: {value!r} is not a positive integer")
    if not 0 < out.dev < 1:
        raise InputError(f"pseudo_queries.{name}.dev: {out.dev!r} is not a fraction between 0 and 1")
    return out


def _normalise(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def _span(words: list[str], length: int, rng: np.random.Generator, short_rng: np.random.Generator) -> tuple[int, int]:
    """A random span of ``length`` words, or of half the document where it has fewer than twice that (the positive
    keeps at least as many words as the query came from); (0, 0) for a document of fewer than two words. A
    shortened span is drawn from ``short_rng``, so that the long documents' draws from ``rng`` do not shift."""
    if len(words) >= 2 * length:
        start = int(rng.integers(0, len(words) - length + 1))
        return start, start + length
    half = len(words) // 2
    if half == 0:
        return 0, 0
    start = int(short_rng.integers(0, len(words) - half + 1))
    return start, start + half


def make_pseudo_queries(
    corpus: Corpus,
    cfg: PseudoQuerySettings,
    titles: dict[str, str] | None = None,
    query_formulation: dict | None = None,
) -> tuple[dict[str, str], dict[str, str], int]:
    """(pseudo-query id -> text, pseudo-query id -> its positive's text without what the query came from, how many
    spans were shortened to half their document), before the filters. Deterministic for a fixed seed. Ids are
    ``p<doc id>``: one per document at most."""
    titles = titles or {}  # read only where the source is titles, which needs them
    rng, short_rng = np.random.default_rng(cfg.seed), np.random.default_rng([cfg.seed, 1])
    doc_ids = sorted(corpus.docs)
    if cfg.source == "titles":
        if not titles:
            raise InputError(
                f"pseudo_queries: source titles needs document titles; the collection has none in field "
                f"{cfg.title_field!r} (set title_field, or use source: ict or formulated)"
            )
        doc_ids = [d for d in doc_ids if titles.get(d, "").strip()]
    order = rng.permutation(len(doc_ids))
    queries: dict[str, str] = {}
    positives: dict[str, str] = {}
    shortened: set[str] = set()
    for i in order:
        if len(queries) >= cfg.count:
            break
        doc_id = doc_ids[int(i)]
        text = corpus.docs[doc_id]
        if cfg.source == "titles":
            title = " ".join(titles[doc_id].split())
            rest = re.sub(r"\s+".join(map(re.escape, title.split())), " ", text, flags=re.IGNORECASE)
            query, positive = title, rest
        else:
            words = text.split()
            length = cfg.query_words if cfg.source == "ict" else cfg.passage_words
            start, end = _span(words, length, rng, short_rng)
            if end == 0:
                continue
            if end - start < length:
                shortened.add(f"p{doc_id}")
            query, positive = " ".join(words[start:end]), " ".join(words[:start] + words[end:])
        if not _normalise(positive) or not _normalise(query):
            continue
        queries[f"p{doc_id}"], positives[f"p{doc_id}"] = query, positive
    if cfg.source == "formulated":
        qf = {**schema_defaults("query_formulation"), **(query_formulation or {})}
        queries = formulate(queries, corpus.docs, qf["method"], qf["n"])  # the passages -> queries
        queries = {q: t for q, t in queries.items() if t.strip()}
        positives = {q: positives[q] for q in queries}
    return queries, positives, len(shortened & queries.keys())


def _length_setting(cfg: PseudoQuerySettings) -> str:
    """The setting that decides how much of a document a pseudo-query takes."""
    return {"titles": "title_field", "ict": "query_words", "formulated": "passage_words"}[cfg.source]


def _median_words(corpus: Corpus) -> str:
    """The collection's median document length in whitespace words, for messages."""
    return f"{np.median([len(text.split()) for text in corpus.docs.values()]):g}"


def _check_enough(queries: dict[str, str], made: int, corpus: Corpus, name: str, cfg: PseudoQuerySettings) -> None:
    """Stop where fewer than two pseudo-queries are left: no train/dev split, nothing to learn term weights from."""
    if len(queries) >= 2:
        return
    needs = "a title and text beside it" if cfg.source == "titles" else "a document of two words or more"
    raise InputError(
        f"pseudo_queries.{name}: {len(queries)} pseudo-queries left of {made} made from "
        f"{len(corpus.docs)} documents of median {_median_words(corpus)} words (a {cfg.source} "
        f"pseudo-query needs {needs}, and a query text that is no real query's); check "
        f"pseudo_queries.{name}.{_length_setting(cfg)} against the collection, "
        f"or raise pseudo_queries.{name}.count"
    )


def without_real_queries(queries: dict[str, str], real: dict[str, str]) -> dict[str, str]:
    """``queries`` without any that contains a real query's text (words, lower-cased; a real query of fewer
    than 3 words is compared whole rather than as a substring, or a common word would drop everything)."""
    real_texts = {_normalise(t) for t in real.values()}
    long_texts = [t for t in real_texts if len(t.split()) >= 3]
    kept = {}
    for qid, text in queries.items():
        norm = _normalise(text)
        if norm in real_texts or any(t in norm for t in long_texts):
            continue
        kept[qid] = text
    return kept


def build(
    corpus: Corpus,
    name: str,
    cfg: dict | PseudoQuerySettings,
    out: Path,
    titles: dict[str, str] | None = None,
    query_formulation: dict | None = None,
    bm25=None,
) -> dict:
    """``bm25(queries, depth)``: the BM25 run of the pseudo-queries (default: bm25s over ``corpus.docs`` in memory)."""
    from longrank.retrieval.bm25 import bm25_run

    bm25 = bm25 or (lambda queries, depth: bm25_run(corpus.docs, queries, top_k=depth))
    cfg = cfg if isinstance(cfg, PseudoQuerySettings) else settings(name, cfg)
    queries, positives, shortened = make_pseudo_queries(corpus, cfg, titles, query_formulation)
    made = len(queries)
    if shortened:
        _warn_shortened(corpus, name, cfg, shortened)
    queries = without_real_queries(queries, corpus.queries)
    containing_real = made - len(queries)
    _check_enough(queries, made, corpus, name, cfg)  # before BM25, which cannot rank for no query
    # Candidates from the collection as it is (the positive with its query text inside, as a first stage sees it).
    run = bm25(queries, cfg.depth)
    qrels = {q: {q[1:]: 1} for q in queries}
    easy = [q for q in queries if run.get(q) and max(run[q], key=lambda d: (run[q][d], d)) == q[1:]]
    if cfg.drop_easy:
        queries = {q: t for q, t in queries.items() if q not in set(easy)}
    _check_enough(queries, made, corpus, name, cfg)
    ids = sorted(queries)
    fold = _dev_split(ids, cfg)
    stats = {
        "name": name,
        "source": cfg.source,
        "settings": cfg.to_json(),
        "made": made,
        "containing_real_query": containing_real,
        "shortened": shortened,
        "positive_ranked_first_by_bm25": len(easy),
        "dropped_easy": len(easy) if cfg.drop_easy else 0,
        "pseudo_queries": len(ids),
        "train": len(fold["train"]),
        "dev": len(fold["dev"]),
        "query_length_mean": float(np.mean([len(queries[q].split()) for q in ids])),
        "positive_in_candidates": sum(q[1:] in run.get(q, {}) for q in ids) / len(ids),
    }
    _write_set(out, queries, positives, {q: qrels[q] for q in ids}, fold, {q: run[q] for q in ids if q in run}, stats)
    log.info(
        "pseudo_queries.%s: %d %s pseudo-queries (%d train, %d dev); %d contained a real query, BM25 ranks the "
        "positive first for %d%s",
        *(name, len(ids), cfg.source, len(fold["train"]), len(fold["dev"]), containing_real, len(easy)),
        " (dropped)" if cfg.drop_easy else "",
    )
    return stats


def _warn_shortened(corpus: Corpus, name: str, cfg: PseudoQuerySettings, shortened: int) -> None:
    key = _length_setting(cfg)
    log.warning(
        "pseudo_queries.%s.%s %s: %d of the documents drawn are shorter than twice that (the "
        "collection's median is %s words per document); their spans are half the document",
        *(name, key, getattr(cfg, key), shortened, _median_words(corpus)),
    )


def _dev_split(ids: list[str], cfg: PseudoQuerySettings) -> dict:
    """A seeded share ``dev`` of the pseudo-queries for early stopping, the rest to train on."""
    rng = np.random.default_rng(cfg.seed + 1)
    dev = set(rng.choice(ids, size=max(1, round(cfg.dev * len(ids))), replace=False).tolist())
    return {"train": [q for q in ids if q not in dev], "dev": sorted(dev), "test": []}


def _write_set(out: Path, queries: dict, positives: dict, qrels: dict, fold: dict, run: dict, stats: dict) -> None:
    """The set's files (the queries of ``qrels``, in id order), written into a temporary directory swapped in whole."""
    ids = sorted(qrels)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        with names_full_disk(out, staging):  # a full disk names the output, not the staging name
            write_text(
                staging / "queries.tsv",
                "query_id\ttext\n" + "".join(f"{q}\t{' '.join(queries[q].split())}\n" for q in ids),
            )
            write_qrels(staging / "qrels.txt", qrels)
            write_json(staging / "folds.json", [fold])
            write_run(staging / "candidates.run", run, tag="pseudo_queries")
            write_text(
                staging / "overrides.jsonl",
                "".join(json.dumps({"doc_id": q[1:], "text": positives[q]}) + "\n" for q in ids),
            )
            write_json(staging / "stats.json", stats)
            staging.chmod(umask_mode(0o777))
            replace_directory(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def add_arguments(parser) -> None:
    parser.add_argument("--data", required=True, help="results/{dataset}/data")
    parser.add_argument("--name", required=True, help="the set's name under pseudo_queries")
    parser.add_argument("--config", required=True, help="the set's config entry as JSON")
    parser.add_argument("--dataset", help="the config's dataset block as JSON (source titles reads the titles from it)")
    parser.add_argument("--query-formulation", help="the config's query_formulation as JSON (source formulated)")
    parser.add_argument("--first-stage", help="first_stage: the pisa first stage's resolved entry as JSON")
    parser.add_argument("--index", help="first_stage: that first stage's PISA index (results/{dataset}/pisa/{name})")
    parser.add_argument("--out", required=True, help="the set's directory (results/{dataset}/pseudo_queries/{name})")


def run(args) -> None:
    cfg = settings(args.name, json.loads(args.config))
    titles = None
    if cfg.source == "titles":
        if not args.dataset:
            raise InputError("pseudo_queries: source titles needs --dataset (the collection to read titles from)")
        titles = read_field(json.loads(args.dataset), cfg.title_field)
    qf = json.loads(args.query_formulation) if args.query_formulation else None
    corpus = Corpus(args.data)
    build(corpus, args.name, cfg, Path(args.out), titles, qf, _pisa_bm25(args, cfg, corpus))


def _pisa_bm25(args, cfg: PseudoQuerySettings, corpus: Corpus):
    """With ``first_stage``: BM25 from that pisa first stage's index (None: bm25s in memory)."""
    if not cfg.first_stage:
        return None
    from longrank.retrieval import pisa
    from longrank.retrieval.first_stage import parse_first_stage

    if not (args.first_stage and args.index):
        raise InputError(f"pseudo_queries.{args.name}.first_stage: give --first-stage and --index")
    stage = parse_first_stage(json.loads(args.first_stage))
    if stage.method != pisa.METHOD:
        raise InputError(
            f"pseudo_queries.{args.name}.first_stage: {stage.name!r} is a {stage.method!r} first stage; "
            f"expected a {pisa.METHOD!r} one (BM25 from its on-disk index)"
        )
    settings = stage.settings
    assert isinstance(settings, pisa.PisaSettings), "a pisa first stage's settings (parse_first_stage)"
    docs_path = corpus.dir / "docs.jsonl"
    return lambda queries, depth: pisa.retrieve(Path(args.index), queries, settings, depth, docs_path)[0]
