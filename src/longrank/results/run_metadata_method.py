"""The ``method`` section of a run's ir_metadata record (:mod:`longrank.results.run_metadata`): ``automatic``,
``score ties`` and ``retrieval``, the spec's sequence of pipeline components (``name``, ``method``, ``params``,
``reranks``, ``interpolates``, ``weight``), and what trained a model's weights per fold, which the spec has no key
for (kept under ``longrank: method: training``). Imports nothing heavy."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from longrank.io.json_yaml import load_yaml

UNKNOWN = "unknown"
SUFFIX = ".meta.yaml"
#: how a run's equal scores are ordered (longrank.io.trec_files.ranked)
TIES_BY_ID = "by document id, ascending"
TIES_BY_FIRST_STAGE = "in the reranked first stage's order, then by document id"


def plain(value):
    """The entry as plain YAML types (JSON's: tuples become lists, anything else its string)."""
    return json.loads(json.dumps(value, default=str))


def upstream_components(run_path: str | os.PathLike) -> list[dict]:
    """The pipeline that made a run this one reranks or interpolates, from the record beside it; one component
    naming the file where it has none (a run brought from elsewhere, or written before the records)."""
    path = Path(run_path)
    meta_path = path.with_name(path.name + SUFFIX)
    try:
        retrieval = (load_yaml(meta_path.read_text(encoding="utf-8")) or {}).get("method", {}).get("retrieval")
    except (OSError, ValueError, AttributeError):
        retrieval = None
    if isinstance(retrieval, list) and retrieval:
        return retrieval
    return [{"name": path.name.removesuffix(".run"), "method": "a given run", "params": {"file": str(path)}}]


def own_component(tag: str, entry: dict, pipeline: dict) -> list[dict]:
    """This stage's components: one that retrieves or reranks, or, for an interpolation, the interpolation (and
    the model before it where the caller ran both: ``longrank rerank --ranker ... --interpolate``)."""
    if "retrieves" in pipeline:
        return [{"name": tag, "method": pipeline["retrieves"], "params": entry}]
    method = entry.get("type") or entry.get("method") or UNKNOWN
    if "interpolates" in pipeline:
        weights = entry.get("weights") or []
        one = {"weight": weights[0]} if weights and all(w == weights[0] for w in weights) else {}
        interpolation = {"name": tag, "method": "interpolation", "params": entry}
        return [interpolation | {"interpolates": pipeline["interpolates"]} | one]
    depth = pipeline.get("depth")
    params = entry | ({"rerank_depth": depth} if depth is not None and "rerank_depth" not in entry else {})
    reranks = {"reranks": pipeline["reranks"]} if "reranks" in pipeline else {}
    if "interpolation_weight" not in pipeline:
        return [{"name": tag, "method": method, "params": params} | reranks]
    model = {"name": f"{tag} (before interpolation)", "method": method, "params": params}
    return [
        model | {"reranks": pipeline["reranks"]},
        {
            "name": tag,
            "method": "interpolation",
            "interpolates": [model["name"], pipeline["reranks"]],
            "weight": pipeline["interpolation_weight"],
        },
    ]


def method_section(
    tag: str, entry: dict, pipeline: dict, upstream: Sequence[str | os.PathLike], score_ties: str | None
) -> dict:
    """The spec's ``method``: every run here is made by a program (automatic); ``retrieval`` lists the runs'
    components this one builds on (each once, first seen first), then its own."""
    components: list[dict] = []
    for run in upstream:
        components += [c for c in upstream_components(run) if c.get("name") not in {d.get("name") for d in components}]
    if components and "reranks" in pipeline:  # by the name its own record gives it, not the file's
        pipeline = pipeline | {"reranks": components[-1]["name"]}
    if score_ties is None:
        score_ties = TIES_BY_ID if "retrieves" in pipeline else TIES_BY_FIRST_STAGE
    return {
        "automatic": True,
        "score ties": score_ties,
        "retrieval": components + plain(own_component(tag, entry, pipeline)),
    }


def training_section(checkpoints: list[str | os.PathLike]) -> list[dict]:
    """Per fold, what trained the weights a run was scored with: train_summary.json and the weights' manifest."""
    folds: list[dict[str, Any]] = []
    for checkpoint in checkpoints:
        folder = Path(checkpoint).parent
        try:
            summary = json.loads((folder / "train_summary.json").read_text())
            manifest = json.loads((folder / "model.manifest.json").read_text())
        except (OSError, ValueError):
            folds.append({"weights": str(checkpoint), "summary": UNKNOWN})
            continue
        folds.append(
            {
                "fold": summary.get("fold"),
                "steps_run": summary.get("steps_run"),
                "best_step": summary.get("best_step"),
                "best_dev_ndcg10": summary.get("best_dev_ndcg10"),
                "seed": (summary.get("hyperparameters") or {}).get("seed"),
                "seconds": summary.get("seconds"),
                "device": summary.get("device"),
                "deterministic": bool(summary.get("deterministic")),  # absent: a summary from before the key, off
                "weights_sha256": manifest.get("files", {}).get(Path(checkpoint).name, {}).get("sha256", UNKNOWN),
            }
        )
    return folds
