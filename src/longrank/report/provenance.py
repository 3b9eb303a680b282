"""Section: when and from what the report was made, the collection, the package versions and the resolved config."""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import platform

from longrank.report.context import Context
from longrank.report.html import Section
from longrank.tables import fmt

PACKAGES = ["longrank", "torch", "transformers", "safetensors", "bm25s", "ir_datasets", "ir_measures", "pytrec_eval_terrier",
            "snakemake", "gensim", "scikit-learn", "scipy", "statsmodels", "numpy", "pandas", "matplotlib"]


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
    if inp.config:
        sec.text("Seeds (the same config and seeds give byte-identical run files on the same machine): " + seeds(inp.config, inp.root) + ".")
    sec.table(["Package", "Version"], versions)
    if inp.config:
        sec.code(json.dumps(inp.config, indent=2, sort_keys=True))
    else:
        sec.note("No config.json found in the results directory.")
    return sec


def seeds(config: dict, root) -> str:
    """Every seed a run depends on: the split's, word2vec's (where a model uses it) and each model's training
    seed, as its training job recorded it (``train_summary.json``: the config's ``train.seed`` or the default)."""
    parts = [f"split {config.get('splits', {}).get('seed', '?')}"]
    if any(entry.get("embeddings") == "word2vec" for entry in config.get("models", {}).values()):
        parts.append(f"word2vec {config.get('word2vec', {}).get('seed', '?')}")
    by_seed: dict[str, list[str]] = {}
    for name in config.get("models", {}):
        summaries = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((root / "models" / name).glob("fold*/train_summary.json"))]
        recorded = {str(s["hyperparameters"]["seed"]) for s in summaries if "seed" in s.get("hyperparameters", {})}  # none: not trained
        if recorded:
            by_seed.setdefault("/".join(sorted(recorded)), []).append(name)
    parts += [f"training {seed} ({', '.join(names)})" for seed, names in sorted(by_seed.items())]
    return "; ".join(parts)
