"""The shapes of the JSON files one stage writes and another reads, one definition each.

A stage writes its file through ``Record.write(path)`` and every reader (the report, tests) reads it through
``Record.read(path)``, so a field renamed on one side cannot leave the other reading a key that is never
written (the report once read a top-level ``dev_ndcg10_by_weight`` the interpolate stage wrote per fold).
Reading is strict: a missing or unknown field fails naming the file and the field.

- ``Interpolation``: ``runs/{model}+{first_stage}.interpolation.json`` (stage ``interpolate``)
- ``TrainSummary``: ``models/{model}/fold{k}/train_summary.json`` and ``models/{model}/pretrained/...`` (``train``)
- ``BenchTable``: ``bench/{model}.json``, ``bench/mores.speed.json``, ``bench/mir.speed.json`` (the bench stages)
  with one ``Timing`` (every timed pass, the median, min, max and quartiles) behind each timed cell
- ``AttentionScaling``: ``bench/attention_scaling.json`` (stage ``attention_scaling``)
- ``CompareSettings``: ``compare/settings.json`` (stage ``compare``)
"""

from __future__ import annotations

import dataclasses
import os
import statistics
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from longrank.errors import InputError
from longrank.io.json_yaml import read_json, write_json


class Record:
    """A dataclass written as one JSON object; ``extra`` (where a record has it) keeps the writer's further
    fields, which no shared reader relies on, at the top level of the object."""

    # Every subclass is a dataclass: declaring the field table lets ``dataclasses.fields`` accept a Record.
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        return {**out, **getattr(self, "extra", {})}

    @classmethod
    def from_json(cls, obj: Any, source: str = "") -> Self:
        where = f"{source}: " if source else ""
        if not isinstance(obj, dict):
            raise InputError(f"{where}expected a JSON object for {cls.__name__}, got {type(obj).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        required = {
            f.name
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        }
        missing = sorted(required - set(obj))
        if missing:
            raise InputError(f"{where}{cls.__name__} lacks the field(s) {missing}")
        known = {k: v for k, v in obj.items() if k in names and k != "extra"}
        unknown = {k: v for k, v in obj.items() if k not in names or k == "extra"}
        if unknown and "extra" not in names:
            raise InputError(f"{where}{cls.__name__} has unknown field(s) {sorted(unknown)}")
        record = cls(**known, **({"extra": unknown} if "extra" in names else {}))
        record.check(where)
        return record

    def check(self, where: str) -> None:
        """Constraints beyond the fields' presence; ``where`` names the file in the message."""

    def write(self, path: str | os.PathLike) -> None:
        self.check(f"{path}: ")
        write_json(path, self.to_json())

    @classmethod
    def read(cls, path: str | os.PathLike) -> Self:
        try:
            obj = read_json(path)
        except ValueError as err:
            raise InputError(f"{path}: not valid JSON ({err})") from None
        return cls.from_json(obj, str(path))


@dataclass
class FoldWeight(Record):
    fold: int
    weight: float  # chosen on the fold's dev queries
    dev_ndcg10_by_weight: dict[str, float]  # str(weight) -> the dev queries' nDCG@10 at that weight

    @property
    def dev_ndcg10(self) -> float:
        """The dev nDCG@10 at the chosen weight."""
        return self.dev_ndcg10_by_weight[str(self.weight)]

    def check(self, where: str) -> None:
        if str(self.weight) not in self.dev_ndcg10_by_weight:
            raise InputError(
                f"{where}fold {self.fold}: the chosen weight {self.weight} is not among the weights tried "
                f"{sorted(self.dev_ndcg10_by_weight)}"
            )


@dataclass
class Interpolation(Record):
    system: str  # the interpolated row, {model}+{first stage}
    weight: float  # the mean of the folds' weights
    folds: list[FoldWeight]

    def __post_init__(self):
        self.folds = [f if isinstance(f, FoldWeight) else FoldWeight.from_json(f, self.system) for f in self.folds]

    def to_json(self) -> dict:
        return {**super().to_json(), "folds": [f.to_json() for f in self.folds]}

    def check(self, where: str) -> None:
        if not self.folds:
            raise InputError(f"{where}{self.system}: no folds")
        for fold in self.folds:
            fold.check(where)


@dataclass
class TrainSummary(Record):
    model: str
    fold: int  # the fold's index (pre-training: 0, one run for all folds)
    best_dev_ndcg10: float
    steps_run: int
    best_step: int
    seconds: float | None = None  # None: no training (steps 0)
    stopped_early: bool = False
    device: str | None = None
    processes: int = 1
    # torch's CPU threads per process: CPU arithmetic, so the weights, depend on them (rule threads, MODEL_THREADS)
    threads: int | None = None
    # PyTorch's deterministic algorithms (the config's `deterministic`): a GPU training repeats to the bit only with them
    deterministic: bool = False
    parameters: int | None = None
    trainable_parameters: int | None = None
    hyperparameters: dict = field(default_factory=dict)
    note: str = ""
    # not trained here: the folder of the finished training of the same inputs it was copied from (seconds: that
    # training's)
    restored_from: str = ""


# A timing whose spread (max - min) exceeds this fraction of its median is flagged in the report: its median is
# one draw from a wide range (a shared or throttling machine), not a number to quote to two digits.
SPREAD_LIMIT = 0.10


@dataclass
class Timing(Record):
    """Repeated timed passes of one region (seconds each, after ``warmup`` untimed passes) and their summary: the
    median, min, max and quartiles. The summary fields are recomputed from ``seconds`` on construction, so a file
    cannot carry a median that its samples do not give."""

    seconds: list[float]
    warmup: int
    median_s: float = 0.0
    min_s: float = 0.0
    max_s: float = 0.0
    q1_s: float = 0.0
    q3_s: float = 0.0

    def __post_init__(self):
        if not self.seconds:
            raise InputError("Timing: no timed passes")
        ordered = sorted(self.seconds)
        self.median_s = statistics.median(ordered)
        self.min_s, self.max_s = ordered[0], ordered[-1]
        if len(ordered) > 1:
            self.q1_s, _, self.q3_s = statistics.quantiles(ordered, n=4, method="inclusive")
        else:
            self.q1_s = self.q3_s = ordered[0]

    @property
    def spread(self) -> float:
        """(max - min) / median: the range that decides ``noisy`` (stricter than the IQR, which ignores the tails)."""
        return (self.max_s - self.min_s) / self.median_s if self.median_s > 0 else 0.0

    @property
    def iqr(self) -> float:
        """(q3 - q1) / median."""
        return (self.q3_s - self.q1_s) / self.median_s if self.median_s > 0 else 0.0

    @property
    def noisy(self) -> bool:
        return self.spread > SPREAD_LIMIT

    def describe(self) -> str:
        """The spread as the report prints it: min and max relative to the median, and the IQR; "1 run" for one timed
        pass, which has no spread to give (its figure is one draw, not a median)."""
        if len(self.seconds) == 1:
            return "1 run (no spread)"
        low, high = self.min_s / self.median_s - 1, self.max_s / self.median_s - 1
        return f"{low:+.0%} / {high:+.0%}, IQR {self.iqr:.0%} (n={len(self.seconds)})"


@dataclass
class Rate(Record):
    """The timed passes behind one docs/ms figure: ``docs`` documents scored in each pass, and the passes. Its median
    is the figure (docs / median ms); the slowest and fastest passes give its range."""

    docs: int
    timing: Timing

    def __post_init__(self):
        if not isinstance(self.timing, Timing):
            self.timing = Timing.from_json(self.timing, "rate")

    def to_json(self) -> dict:
        return {"docs": self.docs, "timing": self.timing.to_json()}

    def per_ms(self, seconds: float) -> float:
        return self.docs / (1000 * seconds) if seconds > 0 else float("inf")

    @property
    def median(self) -> float:
        return self.per_ms(self.timing.median_s)

    @property
    def low(self) -> float:
        """docs/ms of the slowest pass."""
        return self.per_ms(self.timing.max_s)

    @property
    def high(self) -> float:
        """docs/ms of the fastest pass."""
        return self.per_ms(self.timing.min_s)

    @property
    def runs(self) -> int:
        return len(self.timing.seconds)

    def describe(self, scale: float = 1.0, digits: int = 2) -> str:
        """``2.31 (1.90–2.52, n=5)``, or ``2.31 (1 run)``: the figure with its range over the passes, ``scale`` times
        docs/ms (1000: docs/s); ``digits`` decimals from 10 up, three significant digits below."""

        def num(v: float) -> str:  # three significant digits below 10 (0.0123 docs/ms), else ``digits`` decimals
            return f"{v:#.3g}" if abs(v) < 10 else f"{v:,.{digits}f}"

        figure = num(scale * self.median)
        if self.runs == 1:
            return f"{figure} (1 run)"
        return f"{figure} ({num(scale * self.low)}–{num(scale * self.high)}, n={self.runs})"


@dataclass
class TimedEntry(Record):
    """A configured entry the side-by-side speed measurement (mir_speed) gives a throughput for: which of the two
    models it is (MIR or MaxP) and the document tokens it reads (``longrank.bench.mir_alike.timed_alike``)."""

    model: str  # MIR | MaxP
    tokens: int


@dataclass
class BenchTable(Record):
    """A bench stage's table as the report renders it, and the throughput it measured."""

    title: str
    columns: list[str]
    rows: list[list]
    notes: str
    docs_per_ms: dict[str, float] = field(default_factory=dict)  # system -> documents re-ranked per millisecond
    # system -> the timed passes behind its docs_per_ms (one per key of docs_per_ms): the report prints its range
    rates: dict[str, Rate] = field(default_factory=dict)
    side_by_side: bool = False  # measured alternating in one process (mir_speed): preferred over a separate bench
    timed_entries: dict[str, TimedEntry] = field(default_factory=dict)  # mir_speed: the entries it timed
    device: str = ""
    # One per row: the timing behind each of the row's timed cells, by column label (a median column; empty for a
    # row with nothing timed, e.g. out of memory). The report prints each one's spread beside it.
    timings: list[dict[str, Timing]] = field(default_factory=list)
    extra: dict = field(default_factory=dict)  # the raw measurements, kept beside the table

    def __post_init__(self):
        self.timings = [
            {col: t if isinstance(t, Timing) else Timing.from_json(t, f"{self.title}, {col}") for col, t in row.items()}
            for row in self.timings
        ]
        self.rates = {
            name: r if isinstance(r, Rate) else Rate.from_json(r, f"{self.title}, rate of {name}")
            for name, r in self.rates.items()
        }
        self.timed_entries = {
            name: e if isinstance(e, TimedEntry) else TimedEntry.from_json(e, f"{self.title}, timed entry {name}")
            for name, e in self.timed_entries.items()
        }

    def to_json(self) -> dict:
        return {
            **super().to_json(),
            "timings": [{col: t.to_json() for col, t in row.items()} for row in self.timings],
            "rates": {name: r.to_json() for name, r in self.rates.items()},
            "timed_entries": {name: e.to_json() for name, e in self.timed_entries.items()},
        }

    def check(self, where: str) -> None:
        bad = next((row for row in self.rows if len(row) != len(self.columns)), None)
        if bad is not None:
            raise InputError(f"{where}{self.title!r}: a row of {len(bad)} cells for {len(self.columns)} columns: {bad}")
        if self.timings and len(self.timings) != len(self.rows):
            raise InputError(f"{where}{self.title!r}: {len(self.timings)} timings for {len(self.rows)} rows")
        unknown = sorted({col for row in self.timings for col in row} - set(self.columns))
        if unknown:
            raise InputError(f"{where}{self.title!r}: timings for columns it does not have: {unknown}")
        stray = sorted(set(self.rates) - set(self.docs_per_ms))
        if stray:
            raise InputError(f"{where}{self.title!r}: rates of systems without a docs_per_ms: {stray}")


@dataclass
class AttentionScaling(Record):
    title: str
    rows: list[dict]  # attention, length, and peak_mb/seconds, or skipped with a reason
    config: dict
    device: str
    device_name: str | None
    method: str
    extra: dict = field(default_factory=dict)


@dataclass
class CompareSettings(Record):
    systems: list[str]  # in table order: letters a, b, c, ...
    measures: list[str]
    reference: str | None  # of the non-inferiority test; noninferiority.csv is written beside only with one
    margins: list[float]
    alpha: float
    bootstrap: int
    seed: int
    n_queries: int
    letters_test: str
    noninferiority_test: str
    # The smallest Holm-corrected Wilcoxon p any outcome could give with these queries and pairs (significance.py:
    # smallest_holm_wilcoxon_p); at or above alpha no difference can be significant at this size.
    smallest_p_holm: float
