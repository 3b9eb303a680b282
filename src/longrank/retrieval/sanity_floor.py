"""A floor of stage ``sanity`` (:mod:`longrank.retrieval.sanity`) as the workflow and the report name it: which
first stage, how deep, how many words. Light on purpose: the workflow's parse and the report read it, neither of
which runs the count."""

from __future__ import annotations

import re
from dataclasses import dataclass

NAME = "query_term_matches"  # the whole-document floor at the global depth: its system name in the workflow and report

_FLOOR_NAME = re.compile(rf"^{NAME}@(?P<stage>[A-Za-z0-9_-]+)-top(?P<depth>[0-9]+)(?:-first(?P<words>[0-9]+)w)?$")


@dataclass(frozen=True)
class Floor:
    """The count of distinct query words over the first ``words`` words of a document (None: all of it), reranking
    the top ``depth`` candidates of ``first_stage``."""

    first_stage: str
    depth: int
    words: int | None

    @property
    def name(self) -> str:
        """Its system name when it is not the global floor (:func:`longrank.floors.floor_systems` names that one
        ``NAME``)."""
        return f"{NAME}@{self.first_stage}-top{self.depth}" + (f"-first{self.words}w" if self.words else "")

    def read_arguments(self) -> list[str]:
        """What stage ``sanity`` is told of the words to read (nothing: the whole document)."""
        return ["--read-words", str(self.words)] if self.words else []

    @classmethod
    def parse(cls, system: str) -> Floor | None:
        """The floor a system name of the ``@`` form describes; None for any other name (``NAME`` included)."""
        m = _FLOOR_NAME.match(system)
        if m is None:
            return None
        return cls(m["stage"], int(m["depth"]), int(m["words"]) if m["words"] else None)
