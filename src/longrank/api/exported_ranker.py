"""The Python API over an exported model (``longrank export``, :mod:`longrank.api.export`):

    ranker = longrank.load_ranker("exported/tk")
    ranker.score("wing lift", ["a text", "another text"])          # -> [float, float]
    ranker.rerank("first.run", "queries.tsv", "docs.jsonl.gz")      # -> DataFrame qid, docno, score, rank

It reads the exported directory alone (no ``results/`` tree, no ``config/``) and scores exactly as the workflow's
rerank stage does: the same model code (``longrank.models.base.Ranker.score_pairs``) over the same batches of (query, document) pairs.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from longrank.errors import InputError
from longrank.io.json_yaml import read_json
from longrank.io.ids import column_ids
from longrank.io.trec_files import Run, read_ranked_run
from longrank.config.schema import schema_default
from longrank.api.export_contents import build_exported_model, check_all_inside, inside_folder

DEFAULT_BATCH_SIZE = schema_default("rerank.batch_size")  # as the rerank stage scores


class UnknownQueryWarning(UserWarning):
    """A query none of whose words the exported word model knows: it scores every document without a match."""


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


class ExportedRanker:
    """A trained LongRank re-ranker loaded from an exported directory."""

    def __init__(
        self,
        path: str | os.PathLike,
        device: str = schema_default("device"),
        batch_size: int = DEFAULT_BATCH_SIZE,
        trust_code: bool = False,
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
        inside_folder(self.path, RANKER_FILE, str(self.path), "file")
        self.meta: dict[str, Any] = read_json(self.path / RANKER_FILE)
        found = self.meta.get("format") if isinstance(self.meta, dict) else None
        if found != FORMAT:
            raise InputError(f"{self.path / RANKER_FILE}: format {found!r}; this LongRank reads {FORMAT!r}")
        check_all_inside(self.path, self.meta)
        check_trusted(self.path, self.meta, trust_code)
        self.name, self.type = self.meta.get("name"), self.meta.get("type")
        self.batch_size = batch_size
        #: the model's rerank depth as the workflow resolved it (export: config.json's resolved_models)
        self.depth: int | None = self.meta.get("rerank_depth")
        for name in (WEIGHTS, "model.manifest.json"):  # fixed names, but a link may lead out of the folder
            inside_folder(self.path, name, f"{self.path}: {name}", "file")
        self.model, pretrained = build_exported_model(self.path, self.meta)
        trained_rows = None if pretrained is None else self.meta["vocabulary"]["words"] + 2
        load_weights(self.model, self.path / WEIGHTS, require_manifest=True, vocabulary_rows=trained_rows)
        if pretrained is not None:  # the trained rows won; the words after them get their pre-trained vectors
            with torch.no_grad():
                self.model.embedder.embedding.weight[trained_rows:] = pretrained
        self.model = self.model.to(resolve_device(device)).eval()
        #: first stage -> the interpolation weight chosen with it (ranker.json ``interpolation``; may be empty)
        self.interpolation: dict[str, dict] = dict(self.meta.get("interpolation") or {})

    def __repr__(self) -> str:
        return f"ExportedRanker({str(self.path)!r}, {self.name!r}, type={self.type!r})"

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

    def depth_for(self, candidates: Run, depth: int | None = None) -> int:
        """How many of each query's ``candidates`` to rerank: ``depth`` where given, else the model's rerank depth,
        else all of them (an export without one)."""
        return depth or self.depth or max((len(r) for r in candidates.values()), default=1)

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

        depth = self.depth_for(candidates, depth)
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
        depth = self.depth_for(candidates, depth)
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


def check_trusted(path: Path, meta: dict, trust_code: bool) -> None:
    """An export of a user's own model (``class:``, docs/your-model.md) names a class that is not LongRank's: building
    it imports and runs that code, so only a caller who says they trust it loads it (as transformers'
    ``trust_remote_code``). The export holds no code; the class is found as its spec says, from the working
    directory or the environment."""
    cfg = meta.get("config")
    if isinstance(cfg, dict) and "class" in cfg and not trust_code:
        raise InputError(
            f"{path / 'ranker.json'}: its model is the class {cfg['class']!r}, not one of LongRank's; loading it "
            "imports and runs that code. If you trust it, pass trust_code=True (load_ranker) or --trust-code "
            "(longrank rerank); the class is found as that spec says, from the working directory or the environment"
        )


def load_ranker(
    path: str | os.PathLike,
    device: str = schema_default("device"),
    batch_size: int = DEFAULT_BATCH_SIZE,
    trust_code: bool = False,
) -> ExportedRanker:
    """A ranker from a directory ``longrank export`` wrote (``device``: auto, cpu, cuda[:N]); ``trust_code``: allow
    an export of a user's own class, which loading imports (``check_trusted``)."""
    return ExportedRanker(path, device, batch_size, trust_code)
