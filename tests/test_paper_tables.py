"""``longrank paper_tables``: each paper's table from every run under a results folder, on what the config and compare
stages write (a TREC DL 2019 run and a Dev run of the full-scale configs, their systems' per-query scores made up).
The rehearsal's own run through it: tests/test_trec_dl_rehearsal.py."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from longrank.cli import main
from longrank.evaluate.metrics import write_eval_tsv
from longrank.report.reproduction import published
from rehearsal import resolved, full_scale

MEASURES = ["nDCG@10", "RR@10", "AP@100", "nDCG@100"]


def finished_run(results, run: str, systems: dict[str, float]):
    """A results folder as the config stage (config.json) and the compare stage (compare/) leave it, each system's
    per-query scores around its given mean."""
    folder = results / resolved(full_scale(run))["dataset"]["name"]
    main(["resolved_config", "--json", json.dumps(resolved(full_scale(run))), "--out", str(folder / "config.json")])
    rng = np.random.default_rng(0)
    queries = pd.Index([f"q{i}" for i in range(30)], name="query_id")
    for system, mean in systems.items():
        frame = pd.DataFrame({m: np.clip(mean + rng.normal(0, 0.05, 30), 0, 1) for m in MEASURES}, index=queries)
        write_eval_tsv(folder / "eval" / f"{system}.tsv", frame)
    main(["compare", "--eval-dir", str(folder / "eval"), "--systems", *systems, "--bootstrap", "50",
          "--out-dir", str(folder / "compare")])  # fmt: skip
    return folder


@pytest.mark.stage
def test_each_papers_table_takes_each_collections_columns_from_the_run_on_it(tmp_path):
    results = tmp_path / "results"
    scores = {"official": 0.45, "knrm": 0.48, "tk": 0.55, "tkl": 0.60, "tkl_4k": 0.61, "mir": 0.62}
    trec = finished_run(results, "2019", scores)
    dev = finished_run(results, "dev", {s: m - 0.2 for s, m in scores.items()})
    main(["paper_tables", "--results", str(results)])
    out = results / "paper-tables"
    cells = pd.read_csv(out / "paper_tables.csv")
    assert len(cells) == len(published())  # every published figure has its row, measured or not
    for folder in (trec, dev):
        table = pd.read_csv(folder / "compare" / "table.csv").set_index(["system", "measure"])["mean"]
        mine = cells[cells.run == str(folder)]
        assert len(mine) and all(r.measured == pytest.approx(table[(r.system, r.measure)]) for r in mine.itertuples())
    tkl = cells[(cells.table == "tkl-table1") & (cells.system == "tkl")].set_index(["collection", "measure"])
    assert tkl.run.notna().all() and set(tkl.index.get_level_values(0)) == {"trec-dl-2019", "msmarco-dev"}
    # ER of TKL over TK on 2019's nDCG@10: the run's improvement over the paper's (0.634 - 0.594)
    table = pd.read_csv(trec / "compare" / "table.csv").set_index(["system", "measure"])["mean"]
    expected = (table[("tkl", "nDCG@10")] - table[("tk", "nDCG@10")]) / (0.634 - 0.594)
    assert tkl.loc[("trec-dl-2019", "nDCG@10"), "er"] == pytest.approx(expected)
    # no run on TREC DL 2020 or on passages: the Conformer-Kernel's and MORES's tables are there, every cell "–"
    assert cells[cells.collection.isin(["trec-dl-2020", "trec-dl-2019-passage"])].measured.isna().all()
    html = (out / "index.html").read_text()
    assert "TKL (Hofstätter et al. 2020), Table 1" in html and str(trec) in html and "–" in html
    latex = (out / "tkl-table1.tex").read_text()
    assert "\\begin{tabular}" in latex and f"{tkl.loc[('trec-dl-2019', 'nDCG@10'), 'measured']:.3f} (0.634)" in latex


def test_without_a_finished_run_it_says_what_to_run(tmp_path, capsys):
    (tmp_path / "results" / "half").mkdir(parents=True)  # no config.json, no compare/
    with pytest.raises(SystemExit):
        main(["paper_tables", "--results", str(tmp_path / "results")])
    assert "no finished run" in capsys.readouterr().err
