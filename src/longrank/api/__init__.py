"""The Python API over an exported model (``longrank export``, :mod:`longrank.api.export`): ``load_ranker(DIR)``
gives an :class:`ExportedRanker`; ``longrank rerank --ranker`` (:mod:`longrank.api.rerank_run`) and PyTerrier
(:mod:`longrank.api.pyterrier`) read the same directory. Torch is imported when a ranker is loaded, not here."""

from longrank.api.exported_ranker import (
    ExportedRanker,
    UnknownQueryWarning,
    load_ranker,
    read_docs,
    read_queries,
    read_ranking,
    read_scores,
)

__all__ = [
    "ExportedRanker",
    "UnknownQueryWarning",
    "load_ranker",
    "read_docs",
    "read_queries",
    "read_ranking",
    "read_scores",
]
