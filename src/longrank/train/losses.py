"""Ranking losses over score groups ``[n_queries, 1 + negatives]`` whose column 0 is the positive."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from longrank.errors import InputError


def pairwise_hinge(scores: torch.Tensor, margin: float = 1.0) -> torch.Tensor:
    """max(0, margin - s+ + s-) averaged over every (positive, negative) pair: KNRM / TK / TKL's loss."""
    return F.relu(margin - scores[:, :1] + scores[:, 1:]).mean()


def ranknet(scores: torch.Tensor) -> torch.Tensor:
    """log(1 + exp(s- - s+)): RankNet's cross-entropy on pairs (the Conformer-Kernel paper's loss)."""
    return F.softplus(scores[:, 1:] - scores[:, :1]).mean()


def listwise_ce(scores: torch.Tensor) -> torch.Tensor:
    """Softmax cross-entropy of the positive against its negatives (MIR's contrastive loss, 1 + 7)."""
    return F.cross_entropy(scores, torch.zeros(len(scores), dtype=torch.long, device=scores.device))


def pointwise_bce(scores: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy with label 1 for the positive, 0 for negatives (MORES's pointwise loss)."""
    labels = torch.zeros_like(scores)
    labels[:, 0] = 1.0
    return F.binary_cross_entropy_with_logits(scores, labels)


LOSSES = {
    "pairwise_hinge": pairwise_hinge,
    "ranknet": ranknet,
    "listwise_ce": listwise_ce,
    "pointwise_bce": pointwise_bce,
}


#: losses that are a mean over (higher, lower) pairs, the only ones extra pairs can be added to
PAIRWISE = ("pairwise_hinge", "ranknet")


def with_negative_pairs(loss, from_candidates: int):
    """The Conformer-Kernel paper's extra pairs (Sec. 4): besides (positive, negative) pairs, each candidate
    negative is ranked above each collection negative (weak supervision: the first stage put it in the top
    candidates). Groups are ``[positive, c candidate negatives, collection negatives]`` (``PairSampler``'s
    order, ``c = from_candidates``); the returned loss is the pairwise ``loss`` averaged over all pairs,
    old and new (RankNet over every labelled pair of a group, as the authors' code)."""

    def loss_with_negative_pairs(scores: torch.Tensor) -> torch.Tensor:
        candidates, collection = scores[:, 1 : 1 + from_candidates], scores[:, 1 + from_candidates :]
        if not candidates.shape[1] or not collection.shape[1]:
            return loss(scores)
        # every (candidate negative, collection negative) pair as a two-column group, the first ranked higher
        higher = candidates[:, :, None].expand(-1, -1, collection.shape[1]).reshape(-1, 1)
        lower = collection[:, None, :].expand(-1, candidates.shape[1], -1).reshape(-1, 1)
        main_pairs, extra_pairs = scores.shape[1] - 1, candidates.shape[1] * collection.shape[1]
        extra = loss(torch.cat([higher, lower], dim=1))
        return (loss(scores) * main_pairs + extra * extra_pairs) / (main_pairs + extra_pairs)

    return loss_with_negative_pairs


def get_loss(name: str):
    try:
        return LOSSES[name]
    except KeyError:
        raise InputError(f"train.loss: {name!r}; expected one of {sorted(LOSSES)}") from None
