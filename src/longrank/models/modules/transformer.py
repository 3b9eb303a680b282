"""A Transformer encoder layer (TK, TKL)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class EncoderLayer(nn.Module):
    """A post-norm Transformer encoder layer (as ``nn.TransformerEncoderLayer``: attention, add & norm, ReLU
    feed-forward, add & norm) on ``F.scaled_dot_product_attention``, so training and inference take the same
    fused attention kernel; PyTorch's inference fast path for ``nn.TransformerEncoderLayer`` uses a masked
    softmax that took over a quarter of TKL's CPU inference time."""

    def __init__(self, dim: int, n_heads: int, ff_dim: int, dropout: float):
        super().__init__()
        self.n_heads, self.dropout = n_heads, dropout
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, ff_dim), nn.ReLU(), nn.Dropout(dropout), nn.Linear(ff_dim, dim))
        self.drop1, self.drop2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, attend: torch.Tensor) -> torch.Tensor:
        """x [N, L, E]; attend [N, 1, 1, L] bool, True for keys that may be attended to."""
        n, length, dim = x.shape
        q, k, v = self.qkv(x).view(n, length, 3, self.n_heads, dim // self.n_heads).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attend, dropout_p=self.dropout if self.training else 0.0
        )
        x = self.norm1(x + self.drop1(self.out(att.transpose(1, 2).reshape(n, length, dim))))
        return self.norm2(x + self.drop2(self.ff(x)))
