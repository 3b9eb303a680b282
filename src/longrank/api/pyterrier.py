"""PyTerrier integration (the ``pyterrier`` extra: ``pip install 'longrank[pyterrier]'``): an exported LongRank model
(``longrank export``) as a ``pt.Transformer`` that reranks a results frame.

    import pyterrier as pt
    from longrank.api.pyterrier import Reranker

    pipeline = first_stage >> Reranker("exported/tk", docstore="docs.jsonl.gz")
    pt.Experiment([first_stage, pipeline], topics, qrels, eval_metrics=[nDCG@10])

The frame needs ``qid``, ``query`` and ``docno``, and the documents' ``text`` (column ``text_field``) or a documents
file given as ``docstore`` (any format the workflow reads). Every row is rescored (cut the first stage, e.g.
``first_stage % 100``, to rerank fewer); the output is the frame with ``score`` replaced and ``rank`` recomputed,
each query's documents by descending score. PyTerrier's core needs no Java for this.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

try:
    import pyterrier as pt
except ImportError as err:  # pragma: no cover - the message is the point
    raise ImportError(
        "longrank.api.pyterrier needs PyTerrier: pip install 'longrank[pyterrier]' (python-terrier)"
    ) from err

from longrank.api.exported_ranker import ExportedRanker, load_ranker, read_docs
from longrank.errors import InputError
from longrank.io.ids import column_ids
from longrank.io.trec_files import ranked
from longrank.config.schema import schema_default

if TYPE_CHECKING:
    import pandas as pd


class Reranker(pt.Transformer):
    """Rerank a PyTerrier results frame with an exported LongRank model."""

    def __init__(
        self,
        path: str | os.PathLike | ExportedRanker,
        docstore: str | os.PathLike | None = None,
        text_field: str = "text",
        device: str = schema_default("device"),
        batch_size: int = schema_default("rerank.batch_size"),
    ):
        self.ranker = path if isinstance(path, ExportedRanker) else load_ranker(path, device, batch_size)
        self.docstore, self.text_field = docstore, text_field

    def __repr__(self) -> str:
        return f"longrank.api.pyterrier.Reranker({str(self.ranker.path)!r})"

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        import pandas as pd

        missing = [c for c in ("qid", "query", "docno") if c not in inp.columns]
        if missing:
            raise InputError(f"{self!r}: the results frame lacks {missing}; it needs qid, query and docno")
        if not len(inp):
            return inp.assign(score=pd.Series(dtype=float), rank=pd.Series(dtype=int))
        frame = inp.reset_index(drop=True)
        where = f"{self!r}: the results frame"
        frame = frame.assign(
            qid=column_ids(frame["qid"], "query", where), docno=column_ids(frame["docno"], "document", where)
        )
        queries = dict(zip(frame["qid"], frame["query"].astype(str)))
        docs: Mapping[str, str]
        if self.text_field in frame.columns:
            docs = dict(zip(frame["docno"], frame[self.text_field].astype(str)))
            docs_from = f"the frame's {self.text_field!r} column"
        elif self.docstore is not None:
            docs, docs_from = read_docs(self.docstore, set(frame["docno"])), str(self.docstore)
        else:
            raise InputError(
                f"{self!r}: the results frame has no {self.text_field!r} column and no docstore was given; "
                "add the text (e.g. pt.text.get_text) or pass docstore='docs.jsonl.gz'"
            )
        # the first stage's order: its score where there is one, else the frame's order (ties: doc id, as everywhere)
        first = (
            frame["score"].astype(float) if "score" in frame.columns else -frame.groupby("qid").cumcount().astype(float)
        )
        candidates: dict[str, dict[str, float]] = {}
        for qid, docno, score in zip(frame["qid"], frame["docno"], first):
            candidates.setdefault(qid, {})[docno] = score
        depth = max(len(r) for r in candidates.values())
        scored = self.ranker.rerank_run(
            candidates, queries, docs, depth, "the results frame", "the frame's query column", docs_from
        )
        frame["score"] = [scored[q][d] for q, d in zip(frame["qid"], frame["docno"])]
        # ties in the first stage's order (a query the model knows no word of keeps it), not by doc id
        position = {(q, d): i for q in scored for i, (d, _) in enumerate(ranked(scored[q], candidates[q]))}
        frame["rank"] = [position[q, d] for q, d in zip(frame["qid"], frame["docno"])]
        frame = frame.sort_values(["qid", "rank"], kind="stable")
        return frame.reset_index(drop=True)
