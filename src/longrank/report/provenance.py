"""Section: when and from what the report was made, the collection, the package versions and the resolved config."""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import platform

from longrank.outputs import TrainSummary
from longrank.report.context import Context
from longrank.report.html import Section
from longrank.tables import fmt

PACKAGES = [
    "longrank",
    "torch",
    "transformers",
    "safetensors",
    "bm25s",
    "ir_datasets",
    "ir_measures",
    "pytrec_eval_terrier",
    "snakemake",
    "gensim",
    "scikit-learn",
    "scipy",
    "statsmodels",
    "numpy",
    "pandas",
    "matplotlib",
]


def section(ctx: Context) -> Section:
    inp = ctx.inp
    sec = Section("Provenance")
    versions = [["python", platform.python_version()]]
    for pkg in PACKAGES:
        try:
            versions.append([pkg, importlib.metadata.version(pkg)])
        except importlib.metadata.PackageNotFoundError:
            versions.append([pkg, "not installed"])
    sec.text(
        f"Generated {dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} from {inp.manifest.config} "
        "and the files its rule named."
    )
    dw = inp.stats["doc_words"]
    sec.text(
        f"Collection: {inp.stats['num_docs']} documents, {inp.stats['num_queries']} queries; document words mean "
        f"{fmt(dw['mean'], 1)}, median {dw['median']}, p90 {dw['p90']}, max {dw['max']}."
    )
    sec.text(relevance(inp.stats["relevance"]))
    roles = inp.stats["query_sets"]
    sec.text(
        f"Queries: models trained on {roles['train']}; the early-stopping point and interpolation weights were chosen "
        f"on {roles['dev']}; the test queries are {roles['test']}."
    )
    sec.text("Seeds (the same config and seeds give byte-identical run files on the same machine): " + seeds(inp) + ".")
    sec.table(["Package", "Version"], versions)
    sec.code(json.dumps(inp.config, indent=2, sort_keys=True))
    return sec


def relevance(applied: dict) -> str:
    """The judgments as the data stage read them (stats.json's ``relevance``): every measure's gains come from it."""
    gains = ", ".join(f"{grade} → {gain:g}" for grade, gain in applied["gains"].items())
    counts = applied["judgments_by_grade"]
    excluded = applied["exclude_grades"]
    return (
        f"Relevance: grade → gain {gains}"
        + (" (the grades' order reversed on purpose)" if applied["reverses_grades"] else "")
        + "; "
        + (f"judgments of grade {', '.join(map(str, excluded))} excluded" if excluded else "no grade excluded")
        + f"; judgments by grade {', '.join(f'{g}: {n:,}' for g, n in counts.items())}."
    )


def seeds(inp) -> str:
    """Every seed a run depends on: the split's, word2vec's (where a model uses it) and each model's training
    seed, as its training job recorded it (``train_summary.json``: the config's ``train.seed`` or the default)."""
    config = inp.config
    parts = [f"split {config.get('splits', {}).get('seed', '?')}"]
    if any(entry.get("embeddings") == "word2vec" for entry in inp.models.values()):
        parts.append(f"word2vec {config.get('word2vec', {}).get('seed', '?')}")
    by_seed: dict[str, list[str]] = {}
    for name, paths in inp.manifest.training.items():
        summaries = [TrainSummary.read(p) for p in paths]
        recorded = {
            str(s.hyperparameters["seed"]) for s in summaries if "seed" in s.hyperparameters
        }  # none: not trained
        if recorded:
            by_seed.setdefault("/".join(sorted(recorded)), []).append(name)
    parts += [f"training {seed} ({', '.join(names)})" for seed, names in sorted(by_seed.items())]
    return "; ".join(parts)
