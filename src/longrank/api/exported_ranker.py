"""The Python API over an exported model (``longrank export``, :mod:`longrank.api.export`):

    ranker = longrank.load_ranker("exported/tk")
    ranker.score("wing lift", ["a text", "another text"])          # -> [float, float]
    ranker.rerank("first.run", "queries.tsv", "docs.jsonl.gz")      # -> DataFrame qid, docno, score, rank

It reads the exported directory alone (no ``results/`` tree, no ``config/``) and scores exactly as the workflow's
rerank stage does: the same model code (``Ranker.score_pairs``) over the same batches of (query, document) pairs.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from longrank.errors import InputError
from longrank.io.json_yaml import read_json
from longrank.io.ids import column_ids
from longrank.io.trec_files import Run, read_ranked_run
from longrank.config.schema import schema_default

DEFAULT_BATCH_SIZE = schema_default("rerank.batch_size")  # as the rerank stage scores


class UnknownQueryWarning(UserWarning):
    """A query none of whose words the exported word model knows: it scores every document without a match."""


class _ExportedCollection:
    """What a word model reads of a collection when it is built (``WordEmbedder.for_corpus``): its vocabulary,
    here the exported one, whatever filter keys the config entry names (it was cut by them already)."""

    def __init__(self, directory: Path, vocab):
        self.dir, self.vocab = directory, vocab

    def word_vocabulary(self, min_doc_freq: int = 1, max_words: int | None = None):
        return self.vocab


# An export is data, never instructions: every path in ranker.json names a file inside the export's own folder, and
# every size is checked against the weights file's header (safetensors: shapes without the tensors) before a model of
# that size is built. Errors name the key and the file, never a line of a file's content.
#: the parts of an export ranker.json names by path, as (key, what it must be)
EXPORT_PATHS = (
    ("vocabulary.file", "file"),
    ("vocabulary.pretrained_words", "file"),
    ("vocabulary.pretrained_vectors", "file"),
    ("encoder.dir", "directory"),
)
#: encoder config.json keys that size tensors; each must be a dimension of some tensor the encoder's weights hold
ENCODER_SIZES = ("vocab_size", "hidden_size", "intermediate_size", "max_position_embeddings", "type_vocab_size")


def inside_export(directory: Path, meta: dict, key: str, kind: str) -> Path:
    """The path ``ranker.json``'s ``key`` (``vocabulary.file``) names, resolved inside ``directory`` (symlinks
    followed): an absolute path, a ``..`` or a link out of the folder is refused naming the key."""
    section, field = key.split(".")
    value = meta[section].get(field) if isinstance(meta.get(section), dict) else None
    return _inside(directory, value, f"{directory / 'ranker.json'}: {key}", kind)


def _inside(directory: Path, value, where: str, kind: str) -> Path:
    if not isinstance(value, str) or not value:
        raise InputError(f"{where}: expected the relative path of a {kind} inside the export, got {value!r}")
    root = directory.resolve()
    path = (root / value).resolve()
    if Path(value).is_absolute() or ".." in Path(value).parts or not path.is_relative_to(root):
        raise InputError(
            f"{where}: {value!r} is not inside the export's folder {directory}; an export names only its own files "
            "(a relative path without '..', no link out of the folder)"
        )
    if not (path.is_dir() if kind == "directory" else path.is_file()):
        raise InputError(f"{where}: {value!r} is not a {kind} of the export {directory}")
    return path


def _whole_number(value, where: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"{where}: expected a whole number >= {minimum}, got {value!r}")
    return value


def weight_shapes(path: Path) -> dict[str, list[int]]:
    """Each tensor's shape from a safetensors file's header (no tensor is read)."""
    from safetensors import SafetensorError, safe_open

    from longrank.io.text_files import check_regular_file

    check_regular_file(path)
    try:
        with safe_open(str(path), framework="pt") as f:
            return {name: list(f.get_slice(name).get_shape()) for name in f.keys()}
    except SafetensorError as err:
        raise InputError(f"{path} is not a safetensors file ({err}); weights are only read from safetensors") from None


def check_vocabulary_sizes(directory: Path, meta: dict) -> None:
    """``vocabulary.words`` and ``vocabulary.embedding_dim`` against the embedding matrix in ``model.safetensors``
    ([words + 2, embedding_dim]: padding and the unknown word come first), before the embedder is built."""
    from longrank.api.export import WEIGHTS

    vocab = meta["vocabulary"]
    where = directory / "ranker.json"
    words = _whole_number(vocab.get("words"), f"{where}: vocabulary.words")
    dim = _whole_number(vocab.get("embedding_dim"), f"{where}: vocabulary.embedding_dim")
    _whole_number(vocab.get("num_docs"), f"{where}: vocabulary.num_docs")
    shapes = weight_shapes(directory / WEIGHTS)
    matrix = next((shape for name, shape in shapes.items() if name.endswith("embedder.embedding.weight")), None)
    if matrix is None:
        raise InputError(f"{directory / WEIGHTS}: no word embedding matrix (embedder.embedding.weight) for vocabulary")
    if matrix != [words + 2, dim]:
        raise InputError(
            f"{where}: vocabulary.words {words} and vocabulary.embedding_dim {dim} do not match the embedding matrix of "
            f"{directory / WEIGHTS} ({matrix[0]} x {matrix[1]}: {matrix[0] - 2} words and their padding and unknown "
            "rows); nothing was built"
        )
    if "pretrained_vectors" in vocab:
        count = _whole_number(vocab.get("pretrained_count"), f"{where}: vocabulary.pretrained_count", minimum=0)
        path = inside_export(directory, meta, "vocabulary.pretrained_vectors", "file")
        found = weight_shapes(path).get("vectors")
        if found != [count, dim]:
            raise InputError(
                f"{where}: vocabulary.pretrained_count {count} and vocabulary.embedding_dim {dim} do not match "
                f"{path} (its vectors: {found}); nothing was built"
            )


def check_encoder_sizes(directory: Path, encoder: Path) -> None:
    """The encoder's ``config.json`` sizes against its own weights' header: each size key must be a dimension of
    some tensor (a hidden_size of 10**9 matches none), the layers no more than the tensors; checked before
    transformers builds (allocates) the model."""
    from longrank.io.json_yaml import read_json

    weights = encoder / "model.safetensors"
    if not weights.is_file():
        raise InputError(
            f"{encoder}: no model.safetensors; an export's encoder is read only from safetensors (never unpickled)"
        )
    config_path = encoder / "config.json"
    config = read_json(config_path) if config_path.is_file() else None
    if not isinstance(config, dict):
        raise InputError(f"{config_path}: expected the encoder's config (a JSON object)")
    shapes = weight_shapes(weights)
    dims = {d for shape in shapes.values() for d in shape}
    for key in ENCODER_SIZES:
        if key in config and config[key] not in dims:
            raise InputError(
                f"{config_path}: {key} {config[key]!r} is the size of no tensor in {weights}; nothing was built"
            )
    layers = config.get("num_hidden_layers", 0)
    if not isinstance(layers, int) or layers > len(shapes):
        raise InputError(
            f"{config_path}: num_hidden_layers {layers!r} is more than {weights} holds tensors ({len(shapes)})"
        )


def _read_pretrained(directory: Path, meta: dict) -> tuple[list[str], Any]:
    """The export's pre-trained words beyond the training vocabulary and their vectors (float32), or none."""
    import torch
    from safetensors.torch import load_file

    from longrank.io.text_files import numbered_lines

    if "pretrained_words" not in meta:
        return [], None
    path = inside_export(directory, {"vocabulary": meta}, "vocabulary.pretrained_words", "file")
    words = []
    for lineno, line in numbered_lines(path):
        word = line.rstrip("\n")
        if not word or len(words) == meta["pretrained_count"]:
            raise InputError(
                f"{path}:{lineno}: {'an empty line' if not word else 'more words than vocabulary.pretrained_count'}"
            )
        words.append(word)
    if len(words) != meta["pretrained_count"]:
        raise InputError(f"{path}: {len(words)} words; vocabulary.pretrained_count says {meta['pretrained_count']}")
    vectors = load_file(str(inside_export(directory, {"vocabulary": meta}, "vocabulary.pretrained_vectors", "file")))
    return words, vectors["vectors"].to(torch.float32)


def _read_vocabulary(directory: Path, meta: dict, pretrained: list[str] = ()):
    """The training vocabulary (ids as at training), then the export's ``pretrained`` words (document frequency 0,
    as a query word the training collection lacked)."""
    from longrank.data.words import Vocabulary
    from longrank.io.text_files import numbered_lines

    path = inside_export(directory, {"vocabulary": meta}, "vocabulary.file", "file")
    words, freqs = [], []
    for lineno, line in numbered_lines(path):
        if lineno == 1:
            continue
        # the message describes the line, never quotes it: a file's lines are not for echoing
        word, sep, df = line.rstrip("\n").partition("\t")
        if not sep or not df.isdigit():
            raise InputError(
                f"{path}:{lineno}: expected word<TAB>document frequency (a whole number); this line has "
                f"{'no tab' if not sep else 'no whole number after its tab'}"
            )
        if len(words) == meta["words"]:
            raise InputError(f"{path}:{lineno}: more words than vocabulary.words ({meta['words']}) in ranker.json")
        words.append(word)
        freqs.append(int(df))
    if len(words) != meta["words"]:
        raise InputError(f"{path}: {len(words)} words; vocabulary.words in ranker.json says {meta['words']}")
    known = set(words)
    if any(w in known for w in pretrained):
        raise InputError(f"{path}: a pre-trained word of the export is also a training word; export the model again")
    return Vocabulary(words + list(pretrained), freqs + [0] * len(pretrained), int(meta["num_docs"]))


def _build(directory: Path, meta: dict):
    """The model the directory describes, untrained (its weights are loaded after), and a word model's pre-trained
    vectors of the words after its training vocabulary (None: none): word models over the exported vocabulary
    (training words first, ids as at training), encoder models over the exported encoder."""
    from longrank.models.registry import build_model

    cfg = meta.get("config")
    if not isinstance(cfg, dict) or not isinstance(cfg.get("type"), str):
        raise InputError(f"{directory / 'ranker.json'}: config: expected the model's config entry with its type")
    cfg = dict(cfg)
    if "vocabulary" in meta:
        check_vocabulary_sizes(directory, meta)
        pretrained, vectors = _read_pretrained(directory, meta["vocabulary"])
        vocab = _read_vocabulary(directory, meta["vocabulary"], pretrained)
        # The initial vectors (GloVe, word2vec) are overwritten by the trained weights: a one-word file of the right
        # width stands in for them, so neither the vectors' package nor the collection's word2vec file is needed.
        with tempfile.TemporaryDirectory(prefix="longrank-ranker-") as tmp:
            stub = Path(tmp) / "width.txt"
            stub.write_text("<width> " + " ".join(["0"] * int(meta["vocabulary"]["embedding_dim"])) + "\n")
            model = build_model({**cfg, "embeddings": str(stub)}, _ExportedCollection(directory, vocab))
        if model.embedder.vocab.words != vocab.words:
            raise InputError(
                f"{directory}: the model's vocabulary differs from {meta['vocabulary']['file']} "
                "(its config entry cuts it again); export the model again"
            )
        return model, vectors
    if "encoder" in meta:
        encoder = inside_export(directory, meta, "encoder.dir", "directory")
        check_encoder_sizes(directory, encoder)
        return build_model({**cfg, "encoder": str(encoder)}, None), None
    raise InputError(f"{directory / 'ranker.json'}: names neither a vocabulary nor an encoder")


def read_queries(queries: Mapping[str, str] | str | os.PathLike) -> dict[str, str]:
    """Query id -> text: a dict, or a ``.tsv`` (``id<TAB>text``; a first line ``query_id<TAB>text`` / ``qid<TAB>query``
    is a header) or ``.jsonl[.gz]`` file (``{"query_id", "text"}``)."""
    if isinstance(queries, Mapping):
        return {str(k): str(v) for k, v in queries.items()}
    from longrank.data.collections import read_local_queries
    from longrank.io.text_files import numbered_lines
    from longrank.io.text_records import read_id_text_tsv

    path = Path(queries)
    if path.suffix == ".tsv":
        first = next((line for _, line in numbered_lines(path)), "")
        header = first.split("\t")[0].strip().lower() in {"query_id", "qid", "id"}
        return dict(read_id_text_tsv(path, "query", header=header, text_required=True))
    return dict(read_local_queries(str(path)))


def read_docs(docs: Mapping[str, str] | str | os.PathLike, wanted: set[str]) -> Mapping[str, str]:
    """Doc id -> text of the ``wanted`` documents: a dict (used as it is), or a documents file in any format the
    workflow reads (``.jsonl[.gz]``, ``.tsv``, TREC SGML), streamed, keeping only those documents."""
    if isinstance(docs, Mapping):
        return docs
    from longrank.data.collections import read_local_docs

    return {d: t for d, t in read_local_docs(str(docs)) if d in wanted}


def read_scores(run) -> Run | None:
    """A run file's scores as written (``read_run``: ties stay ties), which interpolation normalises as the
    interpolate stage does; None for a DataFrame (its scores are used as they are)."""
    from longrank.io.trec_files import read_run

    return read_run(run) if isinstance(run, (str, os.PathLike)) else None


def read_ranking(run) -> tuple[Run, str]:
    """A ranking as query id -> doc id -> score, and what to call it in errors: a TREC run file, or a DataFrame with
    ``qid``, ``docno`` and ``score`` columns (PyTerrier's)."""
    if isinstance(run, (str, os.PathLike)):
        ranked, ties = read_ranked_run(run)  # in its rank order, as the workflow reads a run_file first stage
        if ties:
            logging.getLogger(__name__).warning(
                "%s: %d documents have the score of the document ranked above them; kept in the file's rank order",
                run,
                ties,
            )
        return ranked, str(run)
    columns = getattr(run, "columns", None)
    if columns is None:
        raise InputError(
            f"run: expected a TREC run file or a DataFrame with qid, docno and score columns, got {type(run).__name__}"
        )
    missing = [c for c in ("qid", "docno", "score") if c not in columns]
    if missing:
        raise InputError(f"run: the DataFrame lacks the column(s) {missing}; expected qid, docno and score")
    out: Run = {}
    for row, (qid, docno, score) in enumerate(
        zip(
            column_ids(run["qid"], "query", "run"),
            column_ids(run["docno"], "document", "run"),
            run["score"].astype(float),
        )
    ):
        if docno in out.setdefault(qid, {}):
            raise InputError(f"run: row {row}: document {docno!r} is ranked twice for query {qid!r}")
        out[qid][docno] = score
    return out, "the run's DataFrame"


class Ranker:
    """A trained LongRank re-ranker loaded from an exported directory."""

    def __init__(
        self, path: str | os.PathLike, device: str = schema_default("device"), batch_size: int = DEFAULT_BATCH_SIZE
    ):
        import torch

        from longrank.api.export import FORMAT, RANKER_FILE, WEIGHTS
        from longrank.models.checkpoint import load_weights
        from longrank.runtime import resolve_device

        self.path = Path(path)
        if not (self.path / RANKER_FILE).is_file():
            raise InputError(
                f"{self.path} is not an exported ranker ({RANKER_FILE} not found); write one with "
                "`longrank export --results results/<dataset> --model <name> --fold N --out DIR`"
            )
        self.meta: dict[str, Any] = read_json(self.path / RANKER_FILE)
        found = self.meta.get("format") if isinstance(self.meta, dict) else None
        if found != FORMAT:
            raise InputError(f"{self.path / RANKER_FILE}: format {found!r}; this LongRank reads {FORMAT!r}")
        self.name, self.type = self.meta.get("name"), self.meta.get("type")
        self.batch_size = batch_size
        self.depth: int | None = self.meta.get("rerank_depth")
        for name in (WEIGHTS, "model.manifest.json"):  # fixed names, but a link may lead out of the folder
            _inside(self.path, name, f"{self.path}: {name}", "file")
        self.model, pretrained = _build(self.path, self.meta)
        trained_rows = None if pretrained is None else self.meta["vocabulary"]["words"] + 2
        load_weights(self.model, self.path / WEIGHTS, require_manifest=True, vocabulary_rows=trained_rows)
        if pretrained is not None:  # the trained rows won; the words after them get their pre-trained vectors
            with torch.no_grad():
                self.model.embedder.embedding.weight[trained_rows:] = pretrained
        self.model = self.model.to(resolve_device(device)).eval()
        #: first stage -> the interpolation weight chosen with it (ranker.json ``interpolation``; may be empty)
        self.interpolation: dict[str, dict] = dict(self.meta.get("interpolation") or {})

    def __repr__(self) -> str:
        return f"Ranker({str(self.path)!r}, {self.name!r}, type={self.type!r})"

    def unknown_words(self, query: str) -> tuple[int, int]:
        """(unknown, all) of ``query``'s words as a word model reads them (stop words as configured, up to its query
        length); (0, 0) for an encoder model (its tokenizer has no unknown words to speak of)."""
        from longrank.data.words import OOV, PAD

        embedder = getattr(self.model, "embedder", None)
        if embedder is None:
            return 0, 0
        ids = embedder.encode_query([query], getattr(self.model, "max_query_len", 10**6))[0]
        ids = ids[ids != PAD]
        return int((ids == OOV).sum()), len(ids)

    def _warn_unknown(self, queries: Mapping[str, str], qids) -> None:
        """Once per query of ``qids`` with no word the model knows: the warning gives the share of unknown words."""
        import warnings

        for qid in dict.fromkeys(qids):
            unknown, total = self.unknown_words(queries[qid])
            if unknown == total and getattr(self.model, "embedder", None) is not None:
                warnings.warn(
                    f"{self.name}: query {qid!r} has no word its vocabulary knows ({unknown} of {total} query words "
                    f"unknown, {unknown / total if total else 1.0:.0%}): the model matches it against no document, "
                    "so documents it scores alike keep the first stage's order",
                    UnknownQueryWarning,
                    stacklevel=3,
                )

    def score(self, query: str, documents) -> list[float]:
        """The model's score of ``query`` against each of ``documents`` (a list of texts, or doc id -> text)."""
        from longrank.scoring import score_candidates

        self._warn_unknown({"q": query}, ["q"])
        texts = dict(documents) if isinstance(documents, Mapping) else {str(i): t for i, t in enumerate(documents)}
        candidates = {"q": {d: 0.0 for d in texts}}
        scored = score_candidates(
            self.model,
            SimpleNamespace(queries={"q": query}, docs=texts),
            candidates,
            ["q"],
            len(texts),
            self.batch_size,
            desc=f"score {self.name}",
        )
        return [scored.get("q", {})[d] for d in texts]

    def rerank_run(
        self,
        candidates: Run,
        queries: Mapping[str, str],
        docs: Mapping[str, str],
        depth: int | None = None,
        where: str = "the run",
        queries_from: str = "queries",
        docs_from: str = "docs",
        interpolate: bool | str = False,
        first_stage_scores: Run | None = None,
    ) -> Run:
        """Rerank each query's top ``depth`` candidates (default: the model's rerank depth, else all of them) in the
        order the queries come in ``candidates``; documents below keep their first-stage order underneath (as the
        workflow's rerank stage). ``interpolate``: mix the model's scores with ``candidates``' own at the weight the
        export holds (``interpolation_weight``; True: its only first stage, or a first stage's name), as the
        workflow's ``{model}+{first_stage}`` run; ``first_stage_scores``: the scores it normalises (default
        ``candidates``'; a run file's as written, ``read_scores``, as the interpolate stage reads its candidates,
        not made distinct). Returns query id -> doc id -> score."""
        from longrank.runs import top_candidates, with_tail
        from longrank.scoring import score_candidates

        depth = depth or self.depth or max((len(r) for r in candidates.values()), default=1)
        qids = list(candidates)
        missing = [q for q in qids if q not in queries]
        if missing:
            raise InputError(
                f"{where}: query {missing[0]!r} is not in {queries_from}"
                + (f" ({len(missing)} queries are missing)" if len(missing) > 1 else "")
            )
        for q in qids:
            for d in top_candidates(candidates, q, depth):
                if d not in docs:
                    raise InputError(f"{where}: document {d!r} (query {q!r}) is not in {docs_from}")
        self._warn_unknown(queries, qids)
        scored = score_candidates(
            self.model,
            SimpleNamespace(queries=queries, docs=docs),
            candidates,
            qids,
            depth,
            self.batch_size,
            desc=f"rerank {self.name}",
        )
        if interpolate:
            from longrank.interpolate import interpolate as mix

            weight = self.interpolation_weight(None if interpolate is True else interpolate)
            scored = mix(scored, first_stage_scores or candidates, weight)
        return with_tail(scored, candidates, qids)

    def interpolation_weight(self, first_stage: str | None = None) -> float:
        """The weight on the model's (min-max normalised) scores that the workflow chose on this fold's dev queries
        with ``first_stage`` (None: the export's only one); the first stage's scores get 1 - weight."""
        if not self.interpolation:
            raise InputError(
                f"{self.path / 'ranker.json'}: no interpolation weight (the results it was exported from had no "
                f"runs/{self.name}+<first stage>.interpolation.json); rerank without interpolating"
            )
        if first_stage is None:
            if len(self.interpolation) > 1:
                raise InputError(
                    f"{self.path}: interpolation weights for {sorted(self.interpolation)}: name the first stage"
                )
            [first_stage] = self.interpolation
        if first_stage not in self.interpolation:
            raise InputError(
                f"{self.path}: no interpolation weight for first stage {first_stage!r}; it has {sorted(self.interpolation)}"
            )
        return float(self.interpolation[first_stage]["weight"])

    def rerank(self, run, queries, docs, depth: int | None = None, interpolate: bool | str = False):
        """Rerank ``run`` (a TREC run file or a DataFrame qid, docno, score) with ``queries`` (dict or a .tsv /
        .jsonl file) and ``docs`` (dict or a docs.jsonl[.gz] / .tsv / TREC file): a DataFrame qid, docno, score, rank,
        ties in the run's order. ``interpolate``: as ``rerank_run``'s (``run`` must be the first stage named)."""
        import pandas as pd

        from longrank.io.trec_files import ranked
        from longrank.runs import top_candidates

        candidates, where = read_ranking(run)
        depth = depth or self.depth or max((len(r) for r in candidates.values()), default=1)
        wanted = {d for q in candidates for d in top_candidates(candidates, q, depth)}
        reranked = self.rerank_run(
            candidates,
            read_queries(queries),
            read_docs(docs, wanted),
            depth,
            where,
            "queries" if isinstance(queries, Mapping) else str(queries),
            "docs" if isinstance(docs, Mapping) else str(docs),
            interpolate,
            read_scores(run) if interpolate else None,
        )
        rows = [
            (q, d, s, rank)
            for q, ranking in reranked.items()
            for rank, (d, s) in enumerate(ranked(ranking, candidates[q]), start=1)
        ]
        return pd.DataFrame(rows, columns=["qid", "docno", "score", "rank"])


def load_ranker(
    path: str | os.PathLike, device: str = schema_default("device"), batch_size: int = DEFAULT_BATCH_SIZE
) -> Ranker:
    """A ranker from a directory ``longrank export`` wrote (``device``: auto, cpu, cuda[:N])."""
    return Ranker(path, device, batch_size)
