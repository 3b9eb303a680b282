"""One vector from a variable number of node states under a mask: MIR's attention pooling (Eq. 10-12) and the
PARADE-style alternatives of its Table 4 (max, CNN, Transformer)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from longrank.models.modules.transformer import EncoderLayer


def init_linear(module: nn.Module, std: float) -> None:
    """BERT's initialisation (normal weights, zero biases) for the new layers beside a pretrained encoder."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


class AttentionPooling(nn.Module):
    """Eq. 10-12: multi-head pooling with a learned query w_v: o = W^O [o_1; ...; o_h],
    o_i = (G W_i^V)^T softmax(G W_i^K W_i^Q w_v) (Eq. 11 has no 1/sqrt(d) scale, so neither does this)."""

    def __init__(self, dim: int, heads: int, std: float):
        super().__init__()
        self.heads = heads
        self.w = nn.Parameter(torch.randn(dim) * std)
        self.query, self.key, self.value, self.out = (nn.Linear(dim, dim) for _ in range(4))
        init_linear(self, std)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, n, dim = x.shape
        split = lambda t: t.view(t.shape[0], -1, self.heads, dim // self.heads).transpose(1, 2)  # noqa: E731
        q = split(self.query(self.w).view(1, 1, dim)).expand(b, -1, -1, -1)
        pooled = F.scaled_dot_product_attention(
            q, split(self.key(x)), split(self.value(x)), attn_mask=mask[:, None, None, :], scale=1.0
        )
        return self.out(pooled.transpose(1, 2).reshape(b, dim))


class MaxPooling(nn.Module):
    """Table 4's MIR-Max: the element-wise max over a view's nodes."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return x.masked_fill(~mask[..., None], float("-inf")).max(dim=1).values


class CNNPooling(nn.Module):
    """Table 4's MIR-CNN, after PARADE-CNN: Conv1d (kernel 2, stride 2) + ReLU halves the nodes until one vector
    is left. One layer's weights serve every level, since the number of nodes (and so of levels) varies by view
    and document; padding nodes and the padding up to a power of two are zeros."""

    def __init__(self, dim: int):
        super().__init__()
        self.conv = nn.Conv1d(dim, dim, kernel_size=2, stride=2)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = (x * mask[..., None].to(x.dtype)).transpose(1, 2)  # [B, E, N]
        width = 2 ** max(1, math.ceil(math.log2(max(x.shape[-1], 1))))
        x = F.pad(x, (0, width - x.shape[-1]))
        while x.shape[-1] > 1:
            x = F.relu(self.conv(x))
        return x[..., 0]


class TransformerPooling(nn.Module):
    """Table 4's MIR-Transformer, after PARADE-Transformer: a learned [CLS] vector before the nodes, one
    Transformer layer over them, its output at [CLS]."""

    def __init__(self, dim: int, heads: int, ff_dim: int, dropout: float, std: float):
        super().__init__()
        self.cls = nn.Parameter(torch.randn(dim) * std)
        self.layer = EncoderLayer(dim, heads, ff_dim, dropout)
        init_linear(self.layer, std)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = torch.cat([self.cls.to(x.dtype).expand(x.shape[0], 1, -1), x], dim=1)
        attend = torch.cat([mask.new_ones(mask.shape[0], 1), mask], dim=1)[:, None, None, :]
        return self.layer(x, attend)[:, 0]


POOLINGS = ("attention", "max", "cnn", "transformer")


def node_pooling(kind: str, dim: int, heads: int, ff_dim: int, dropout: float, std: float) -> nn.Module:
    """A new pooling of ``kind`` (one of POOLINGS) over ``dim``-wide node states."""
    if kind == "attention":
        return AttentionPooling(dim, heads, std)
    if kind == "max":
        return MaxPooling()
    if kind == "cnn":
        return CNNPooling(dim)
    return TransformerPooling(dim, heads, ff_dim, dropout, std)
