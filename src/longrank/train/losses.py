"""Ranking losses over score groups ``[n_queries, 1 + negatives]`` whose column 0 is the positive."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from longrank.io import InputError


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


LOSSES = {"pairwise_hinge": pairwise_hinge, "ranknet": ranknet, "listwise_ce": listwise_ce, "pointwise_bce": pointwise_bce}


def get_loss(name: str):
    try:
        return LOSSES[name]
    except KeyError:
        raise InputError(f"train.loss: {name!r}; expected one of {sorted(LOSSES)}") from None
