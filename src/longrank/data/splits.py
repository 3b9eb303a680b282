"""Deterministic query splits: one train/dev/test hold-out split, or k folds for cross-validation
(fold i tests on chunk i, early-stops on chunk i+1, trains on the rest), so every query is tested once."""

from __future__ import annotations

import numpy as np

from longrank.errors import InputError
from longrank.config.schema import schema_default


def make_folds(
    query_ids: list[str],
    method: str = schema_default("splits.method"),
    dev: float = schema_default("splits.dev"),
    test: float = schema_default("splits.test"),
    k: int = schema_default("splits.k"),
    seed: int = schema_default("splits.seed"),
) -> list[dict[str, list[str]]]:
    qids = sorted(query_ids)
    order = np.random.default_rng(seed).permutation(len(qids))
    shuffled = [qids[i] for i in order]
    if method == "holdout":
        if not (0 < dev < 1 and 0 < test < 1 and dev + test < 1):
            raise InputError(f"splits: dev ({dev}) and test ({test}) must be fractions in (0, 1) summing below 1")
        n_test, n_dev = round(len(qids) * test), round(len(qids) * dev)
        if min(n_test, n_dev, len(qids) - n_test - n_dev) < 1:
            raise InputError(f"splits: {len(qids)} queries are too few for dev={dev}, test={test}")
        folds = [
            {"test": shuffled[:n_test], "dev": shuffled[n_test : n_test + n_dev], "train": shuffled[n_test + n_dev :]}
        ]
    elif method == "kfold":
        if k < 3 or k > len(qids):
            raise InputError(f"splits.k: {k} folds need 3 <= k <= number of queries ({len(qids)})")
        chunks = [list(c) for c in np.array_split(np.array(shuffled, dtype=object), k)]
        folds = []
        for i in range(k):
            dev_i = (i + 1) % k
            folds.append(
                {
                    "test": chunks[i],
                    "dev": chunks[dev_i],
                    "train": [q for j, c in enumerate(chunks) if j not in (i, dev_i) for q in c],
                }
            )
    else:
        raise InputError(f"splits.method: {method!r}; expected holdout or kfold")
    return [{name: sorted(ids) for name, ids in fold.items()} for fold in folds]
