"""The rows the benches measure, as typed records written into their JSON (``extra``) key for key as the report and
readers outside it read them: a field left unmeasured (None; ``oom`` false) is left out of the object."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from longrank.results.stage_outputs import Record, Timing


@dataclass
class LengthMeasurement(Record):
    """``longrank bench`` at one document length: the first forward's peak memory (and window passes) in a process of
    its own, then the speed of the lengths alternating in one process; ``oom`` where either ran out of memory."""

    length: int  # words asked for
    effective_length: int  # what the model scored (its max_doc_len caps it), in the model's unit
    device_name: str
    memory_method: str
    ms_per_batch: float | None = None  # median ms per timed forward
    docs_per_ms: float | None = None
    peak_memory_mb: float | None = None
    timing: dict | None = None  # the timed forwards (outputs.Timing as JSON)
    window_passes: int | None = None  # windows per forward, for a model that counts them
    oom: bool = False

    def to_json(self) -> dict:
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if getattr(self, f.name) is not None and (f.name != "oom" or self.oom)
        }

    @property
    def timed_passes(self) -> Timing | None:
        """The timed forwards as a Timing (None: not timed)."""
        return Timing.from_json(self.timing) if self.timing is not None else None


@dataclass
class SpeedRow(Record):
    """``mores_speed`` (MORES Table 4): one variant at one document length and encoder size, timed beside the BERT
    ranker in one process, its time extrapolated to the target candidates."""

    size: str  # configured | bert-base
    hidden: int
    layers: int
    doc_len: int
    model: str  # BERT ranker | MORES {k}xIB
    reuse: str  # -, none, s1, s2 (on a GPU also "s1 via host", "s2 via host")
    time_s: float  # per target candidates
    speedup: float  # the BERT ranker's time over this one's
    flop_ratio: float  # the BERT ranker's online operations over this one's
    gflops_per_doc: float
    space_mb_per_doc: float  # of its store (0 without one)
    timed_candidates: int
    timing: dict  # seconds per pass over the timed candidates (outputs.Timing as JSON)
    query_module_s: float  # of which the query module, once per pass (extrapolated: once per target)
