"""Training examples: per step, ``batch_size`` training queries, each with one judged-relevant document and
``negatives`` documents from its first-stage candidates that are not judged relevant.

Sampling is a pure function of (seed, step), so a resumed run draws exactly the batches the killed run
would have drawn."""

from __future__ import annotations

import numpy as np

from longrank.io import InputError


class PairSampler:
    def __init__(self, train_qids: list[str], qrels: dict, candidates: dict, depth: int, negatives: int, seed: int):
        self.positives, self.negatives = {}, {}
        for qid in sorted(train_qids):
            pos = sorted(d for d, g in qrels.get(qid, {}).items() if g > 0)
            ranked = sorted(candidates.get(qid, {}).items(), key=lambda kv: (-kv[1], kv[0]))[:depth]
            neg = [d for d, _ in ranked if qrels.get(qid, {}).get(d, 0) <= 0]
            if pos and neg:
                self.positives[qid], self.negatives[qid] = pos, neg
        if not self.positives:
            raise InputError("no training query has both a relevant document and a non-relevant candidate; check qrels and candidates")
        self.qids = sorted(self.positives)
        self.n_neg, self.seed = negatives, seed

    def batch(self, step: int, batch_size: int) -> tuple[list[str], list[list[str]]]:
        """(query ids, per query [positive, negative_1, ..., negative_n] doc ids) for ``step``."""
        rng = np.random.default_rng([self.seed, step])
        qids = [self.qids[i] for i in rng.choice(len(self.qids), size=batch_size, replace=len(self.qids) < batch_size)]
        groups = []
        for qid in qids:
            pos = self.positives[qid][rng.integers(len(self.positives[qid]))]
            negs = self.negatives[qid]
            picks = rng.choice(len(negs), size=self.n_neg, replace=len(negs) < self.n_neg)
            groups.append([pos] + [negs[i] for i in picks])
        return qids, groups
