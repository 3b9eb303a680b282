"""What a model's config entry says about its run, read the same way by the workflow's parse (``floors``), the
stages and the report: one rule each, written once. Plain dicts in, no torch: the report imports nothing of
``models/`` or ``train/``, and the floors sit below the report."""

from __future__ import annotations

from typing import Mapping


def is_zero_shot(entry: Mapping | None) -> bool:
    """An untrained model (``train: {steps: 0}``), e.g. the bi-encoder floor every fine-tuned encoder is read against."""
    return bool(entry) and not entry.get("checkpoint_of") and (entry.get("train") or {}).get("steps", 1) == 0


def rerank_depth(entry: Mapping | None, global_depth: int) -> int:
    """How many first-stage candidates the model scores: its own ``rerank_depth``, else the config's."""
    return int((entry or {}).get("rerank_depth") or global_depth)
