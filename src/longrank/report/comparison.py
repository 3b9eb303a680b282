"""The systems' comparison the report's sections read: the compare stage's outputs, as its rule passed them."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from longrank.evaluate.comparison_tables import NONINFERIORITY_FILE, ComparisonTables
from longrank.evaluate.metrics import read_eval_tsv
from longrank.evaluate.significance import smallest_wilcoxon_p
from longrank.results.stage_outputs import CompareSettings
from longrank.report.inputs import PRIMARY, Inputs
from longrank.tables import fmt_p


@dataclass
class Comparison:
    systems: list[str]
    tables: ComparisonTables  # compare's table.csv, pairs.csv and noninferiority.csv (with a reference)
    settings: CompareSettings
    frames: dict[str, pd.DataFrame]  # system -> per-query evaluation
    letters: dict[str, str] = field(init=False)
    measures: list[str] = field(init=False)

    def __post_init__(self):
        self.letters = dict(zip(self.table["system"], self.table["letter"]))
        self.measures = list(dict.fromkeys(self.table["measure"]))

    @property
    def table(self) -> pd.DataFrame:
        """system, letter, measure, mean, ci_low, ci_high, better_than, n_queries"""
        return self.tables.table

    @property
    def pairs(self) -> pd.DataFrame:
        return self.tables.pairs

    @property
    def noninferiority(self) -> pd.DataFrame | None:
        return self.tables.noninferiority

    @property
    def primary(self) -> str:
        return PRIMARY if PRIMARY in self.measures else self.measures[0]

    @property
    def alpha(self) -> float:
        return self.settings.alpha

    @property
    def too_few_queries(self) -> str | None:
        return small_sample_warning(self.settings)

    def means(self, measure: str = PRIMARY) -> pd.Series:
        """System -> mean of ``measure``."""
        return self.table[self.table.measure == measure].set_index("system")["mean"]


def small_sample_warning(settings: CompareSettings) -> str | None:
    """Why no difference can be significant with this many test queries (None when one can): the compare stage
    records the smallest Holm-corrected Wilcoxon p its queries and pairs allow."""
    if settings.smallest_p_holm < settings.alpha:
        return None
    n, k = settings.n_queries, len(settings.systems)
    return (
        f"Too few test queries for any significant difference: with {n} queries the two-sided Wilcoxon signed-rank "
        f"test cannot give p below 2/2^{n} = {fmt_p(smallest_wilcoxon_p(n))}, and Holm's correction over the "
        f"{k * (k - 1) // 2} pairs of the table raises the smallest to {fmt_p(settings.smallest_p_holm)}, not below "
        f"alpha {settings.alpha}. Every verdict below reads 'not significant' whatever the systems do: it says nothing "
        "about them. Evaluate on more queries."
    )


def load_comparison(inp: Inputs) -> Comparison:
    """The compare stage's outputs, with each compared system's per-query evaluation."""
    files = inp.manifest.compare
    settings = CompareSettings.read(files["settings"])
    tables = ComparisonTables.read(files["table"], files["pairs"], with_noninferiority=bool(settings.reference))
    frames = {s: read_eval_tsv(inp.manifest.evals[s]) for s in settings.systems}
    return Comparison(settings.systems, tables, settings, frames)


def copy_tables(inp: Inputs, cmp: Comparison, out_dir: Path) -> None:
    """compare's tables beside the report."""
    files = inp.manifest.compare
    sources = [files["table"], files["pairs"], files["markdown"], files["latex"]]
    if cmp.noninferiority is not None:
        sources.append(str(Path(files["table"]).with_name(NONINFERIORITY_FILE)))
    for source in sources:
        shutil.copyfile(source, out_dir / Path(source).name)
