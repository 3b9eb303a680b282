"""The systems' comparison the report's sections read: compare's outputs, or the same computed here from the eval TSVs."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from longrank.evaluate.metrics import read_eval_tsv
from longrank.evaluate.significance import compare
from longrank.io import read_json
from longrank.report.inputs import PRIMARY, Inputs

COMPARE_FILES = ["table.csv", "pairs.csv", "noninferiority.csv", "table.md", "table.tex"]


@dataclass
class Comparison:
    systems: list[str]
    table: pd.DataFrame  # compare's table.csv: system, letter, measure, mean, ci_low, ci_high, better_than, n_queries
    pairs: pd.DataFrame  # compare's pairs.csv
    noninferiority: pd.DataFrame | None
    settings: dict
    frames: dict[str, pd.DataFrame]  # system -> per-query evaluation
    note: str | None = None  # set when computed by the report rather than read from compare's outputs
    letters: dict[str, str] = field(init=False)
    measures: list[str] = field(init=False)

    def __post_init__(self):
        self.letters = dict(zip(self.table["system"], self.table["letter"]))
        self.measures = list(dict.fromkeys(self.table["measure"]))

    @property
    def primary(self) -> str:
        return PRIMARY if PRIMARY in self.measures else self.measures[0]

    @property
    def alpha(self) -> float:
        return self.settings.get("alpha", 0.05)

    def means(self, measure: str = PRIMARY) -> pd.Series:
        """System -> mean of ``measure``."""
        return self.table[self.table.measure == measure].set_index("system")["mean"]


def load_comparison(inp: Inputs, bootstrap: int = 2000) -> Comparison | None:
    """compare's outputs when present; else computed here from the eval TSVs (noted in the report)."""
    settings_path = inp.compare_dir / "settings.json"
    if (inp.compare_dir / "table.csv").exists() and (inp.compare_dir / "pairs.csv").exists():
        table = pd.read_csv(inp.compare_dir / "table.csv", keep_default_na=False, na_values=[""])
        table["better_than"] = table["better_than"].fillna("").astype(str)
        pairs = pd.read_csv(inp.compare_dir / "pairs.csv")
        ni_path = inp.compare_dir / "noninferiority.csv"
        ni = pd.read_csv(ni_path) if ni_path.exists() else None
        settings = read_json(settings_path) if settings_path.exists() else {}
        systems = settings.get("systems") or list(dict.fromkeys(table["system"]))
        settings.setdefault("alpha", 0.05)
        frames = {s: read_eval_tsv(inp.eval_dir / f"{s}.tsv") for s in systems if (inp.eval_dir / f"{s}.tsv").exists()}
        return Comparison(systems, table, pairs, ni, settings, frames)
    tsvs = sorted(inp.eval_dir.glob("*.tsv")) if inp.eval_dir.exists() else []
    if not tsvs:
        return None
    names = [p.stem for p in tsvs]
    stages = [s for s in inp.first_stages if s in names]  # the first stages first, in config order
    systems = stages + [n for n in names if n not in stages]
    frames = {s: read_eval_tsv(inp.eval_dir / f"{s}.tsv") for s in systems}
    out = compare(frames, n_resamples=bootstrap, seed=0)
    settings = {"systems": systems, "alpha": 0.05, "bootstrap": bootstrap, "seed": 0,
                "n_queries": int(out["table"]["n_queries"].iloc[0])}
    note = (f"No compare outputs in {inp.compare_dir}: the table below was computed by the report from "
            f"{inp.eval_dir} ({bootstrap} bootstrap resamples, alpha 0.05, no non-inferiority reference).")
    return Comparison(systems, out["table"], out["pairs"], None, settings, frames, note)


def copy_tables(inp: Inputs, cmp: Comparison | None, out_dir: Path) -> None:
    """compare's tables beside the report; the csv tables computed here when compare's are missing."""
    if cmp is None:
        return
    for name in COMPARE_FILES:
        if (inp.compare_dir / name).exists():
            shutil.copyfile(inp.compare_dir / name, out_dir / name)
    if cmp.note:
        cmp.table.to_csv(out_dir / "table.csv", index=False, float_format="%.6g")
        cmp.pairs.to_csv(out_dir / "pairs.csv", index=False, float_format="%.6g")
