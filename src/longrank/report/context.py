"""What every section of the report is built from."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from longrank.report.comparison import Comparison
from longrank.report.inputs import Inputs


@dataclass
class Context:
    inp: Inputs
    cmp: Comparison
    fig_dir: Path  # one folder for every figure, so the workflow can declare the figures that exist
    n_length_buckets: int = 4
