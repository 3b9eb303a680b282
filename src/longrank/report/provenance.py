"""Section: when and from what the report was made, the collection, the package versions and the resolved config."""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import platform

from longrank.report.context import Context
from longrank.report.html import Section
from longrank.tables import fmt

PACKAGES = ["torch", "transformers", "bm25s", "ir_datasets", "ir_measures", "pytrec_eval_terrier", "snakemake",
            "scipy", "statsmodels", "numpy", "pandas", "matplotlib"]


def section(ctx: Context) -> Section:
    inp = ctx.inp
    sec = Section("Provenance")
    versions = [["python", platform.python_version()]]
    for pkg in PACKAGES:
        try:
            versions.append([pkg, importlib.metadata.version(pkg)])
        except importlib.metadata.PackageNotFoundError:
            versions.append([pkg, "not installed"])
    sec.text(f"Generated {dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} from {inp.root}.")
    if inp.stats:
        dw = inp.stats.get("doc_words") or {}
        sec.text(f"Collection: {inp.stats.get('num_docs', '?')} documents, {inp.stats.get('num_queries', '?')} queries; "
                 f"document words mean {fmt(dw.get('mean'), 1) if dw.get('mean') is not None else '?'}, "
                 f"median {dw.get('median', '?')}, p90 {dw.get('p90', '?')}, max {dw.get('max', '?')}.")
    sec.table(["Package", "Version"], versions)
    if inp.config:
        sec.code(json.dumps(inp.config, indent=2, sort_keys=True))
    else:
        sec.note("No config.json found in the results directory.")
    return sec
