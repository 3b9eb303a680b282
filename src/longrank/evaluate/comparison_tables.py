"""The compare stage's three tables as one typed value: :func:`longrank.evaluate.significance.compare` returns it,
the stage writes it (``table.csv``, ``pairs.csv`` and, with a reference, ``noninferiority.csv``) and the report reads
it back from those files into the same type."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from longrank.io.atomic import atomic_path
from longrank.tables import read_table

TABLE_FILE = "table.csv"
PAIRS_FILE = "pairs.csv"
NONINFERIORITY_FILE = "noninferiority.csv"


def write_csv(path: Path, frame: pd.DataFrame) -> None:
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, float_format="%.6g")


@dataclass
class ComparisonTables:
    table: (
        pd.DataFrame
    )  # per system and measure: system, letter, measure, mean, ci_low, ci_high, better_than, n_queries
    pairs: pd.DataFrame  # per pair and measure: mean_diff (a - b) and its CI, cohens_d, the tests' p (and Holm's)
    # per measure, system and margin against the reference (significance.NONINFERIORITY_COLUMNS); None: no reference
    noninferiority: pd.DataFrame | None = None

    def write(self, out_dir: Path) -> None:
        write_csv(out_dir / TABLE_FILE, self.table)
        write_csv(out_dir / PAIRS_FILE, self.pairs)
        if self.noninferiority is not None:
            write_csv(out_dir / NONINFERIORITY_FILE, self.noninferiority)

    @classmethod
    def read(cls, table: str | Path, pairs: str | Path, with_noninferiority: bool) -> ComparisonTables:
        """The tables the stage wrote (``noninferiority.csv`` beside ``table``, written exactly when the stage was
        given a reference: ``with_noninferiority``)."""
        frame = read_table(table)
        frame["better_than"] = frame["better_than"].fillna("").astype(str)  # a system better than none: an empty cell
        noninferiority = read_table(Path(table).with_name(NONINFERIORITY_FILE)) if with_noninferiority else None
        return cls(frame, read_table(pairs), noninferiority)
