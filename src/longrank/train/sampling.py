"""Training examples: per step, ``batch_size`` training queries, each with one judged-relevant document and
``negatives`` documents not judged relevant.

Where examples come from matters more than any architecture choice on a small collection:

- ``positives: candidates`` (default) draws positives from the query's top-``depth`` first-stage candidates,
  the documents the model will rerank; a query without a relevant candidate is skipped (logged).
  ``positives: judged`` draws from every judged-relevant document, but the ones the first stage missed share fewer
  words with the query than the candidate negatives do: on Cranfield at depth 30 the positive had more
  distinct query words than its negative in only 41% of pairs and was the shorter one in 65%, and the
  models learned "few matches, short document => relevant" (scores correlated with length at -0.67).
- ``negatives_from: candidates`` (default) draws negatives from the same top-``depth`` candidates;
  ``collection`` from any document not judged relevant for the query; ``both`` takes a third of them
  (rounded up) from the candidates and the rest from the collection: with 3 negatives, the
  Conformer-Kernel paper's one candidate and two random negatives. A group is always ``[positive, candidate
  negatives, collection negatives]``: ``train.negative_pairs`` (the paper's extra candidate-over-collection
  pairs, :func:`longrank.train.losses.with_negative_pairs`) relies on that order and adds to the loss only.

Sampling is a pure function of (seed, step), so a resumed run draws exactly the batches the killed run
would have drawn.
"""

from __future__ import annotations

import logging

import numpy as np

from longrank.errors import InputError

log = logging.getLogger(__name__)

POSITIVES = ("candidates", "judged")
NEGATIVES_FROM = ("candidates", "collection", "both")


class PairSampler:
    def __init__(
        self,
        train_qids: list[str],
        qrels: dict,
        candidates: dict,
        depth: int,
        negatives: int,
        seed: int,
        positives: str = "candidates",
        negatives_from: str = "candidates",
        doc_ids: list[str] | None = None,
    ):
        if positives not in POSITIVES:
            raise InputError(f"train.positives: {positives!r} is not one of {list(POSITIVES)}")
        if negatives_from not in NEGATIVES_FROM:
            raise InputError(f"train.negatives_from: {negatives_from!r} is not one of {list(NEGATIVES_FROM)}")
        if negatives_from != "candidates" and not doc_ids:
            raise InputError(f"train.negatives_from: {negatives_from!r} needs the collection's document ids")
        self.positives, self.negatives = {}, {}
        skipped = []
        for qid in sorted(train_qids):
            judged = qrels.get(qid, {})
            ranked = [d for d, _ in sorted(candidates.get(qid, {}).items(), key=lambda kv: (-kv[1], kv[0]))[:depth]]
            pos = sorted(d for d, g in judged.items() if g > 0)
            if positives == "candidates":
                pos = [d for d in ranked if judged.get(d, 0) > 0]
            neg = [d for d in ranked if judged.get(d, 0) <= 0]
            if pos and (neg or negatives_from == "collection"):
                self.positives[qid], self.negatives[qid] = pos, neg
            else:
                skipped.append(qid)
        if skipped:
            log.info(
                "skipping %d of %d training queries without a relevant %s and a non-relevant candidate in the top %d",
                len(skipped),
                len(train_qids),
                "candidate" if positives == "candidates" else "document",
                depth,
            )
        if not self.positives:
            relevant = f"candidate in the top {depth}" if positives == "candidates" else "document"
            raise InputError(
                f"no training query has a relevant {relevant} "
                "and a non-relevant candidate; check qrels and candidates (or set train.positives: judged)"
            )
        self.qids = sorted(self.positives)
        self.skipped = skipped
        self.qrels, self.doc_ids = qrels, list(doc_ids or [])
        self.n_neg, self.seed = negatives, seed
        self.from_candidates = {"candidates": negatives, "collection": 0, "both": -(-negatives // 3)}[negatives_from]

    def _collection_negatives(self, qid: str, n: int, rng: np.random.Generator) -> list[str]:
        """``n`` documents drawn uniformly from the collection, redrawn while judged relevant for ``qid``."""
        judged = self.qrels.get(qid, {})
        out: list[str] = []
        while len(out) < n:
            d = self.doc_ids[rng.integers(len(self.doc_ids))]
            if judged.get(d, 0) <= 0:
                out.append(d)
        return out

    def batch(self, step: int, batch_size: int) -> tuple[list[str], list[list[str]]]:
        """(query ids, per query [positive, negative_1, ..., negative_n] doc ids) for ``step``."""
        rng = np.random.default_rng([self.seed, step])
        qids = [self.qids[i] for i in rng.choice(len(self.qids), size=batch_size, replace=len(self.qids) < batch_size)]
        groups = []
        for qid in qids:
            pos = self.positives[qid][rng.integers(len(self.positives[qid]))]
            negs = self.negatives[qid]
            picks: np.ndarray | list[int] = (
                rng.choice(len(negs), size=self.from_candidates, replace=len(negs) < self.from_candidates)
                if self.from_candidates
                else []
            )
            groups.append(
                [pos]
                + [negs[i] for i in picks]
                + self._collection_negatives(qid, self.n_neg - self.from_candidates, rng)
            )
        return qids, groups
