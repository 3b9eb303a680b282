"""A Transformer layer over graph nodes whose aggregation follows the graph's edges (MIR's inter-passage layer)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class GraphLayer(nn.Module):
    """Eq. 5, 7, 8: a post-LN Transformer layer over one view's nodes, O = LN(X + Agg(X, A)),
    G = LN(O + FFN(O)), where Agg is multi-head attention masked to the graph (adjacency + self loops) or, for
    Table 3's aggregators, a dense GCN / GIN / GraphSAGE convolution."""

    def __init__(self, dim: int, heads: int, ff_dim: int, dropout: float, aggregator: str = "attention"):
        super().__init__()
        self.heads, self.dropout, self.aggregator = heads, dropout, aggregator
        if aggregator == "attention":
            self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        else:  # imported here: torch_geometric is only needed by these ablations
            from torch_geometric.nn import DenseGCNConv, DenseGINConv, DenseSAGEConv

            self.conv = {
                "gcn": lambda: DenseGCNConv(dim, dim),
                "gin": lambda: DenseGINConv(nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))),
                "sage": lambda: DenseSAGEConv(dim, dim),
            }[aggregator]()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, ff_dim), nn.GELU(), nn.Dropout(dropout), nn.Linear(ff_dim, dim))
        self.drop1, self.drop2 = nn.Dropout(dropout), nn.Dropout(dropout)

    @staticmethod
    def attend(adj: torch.Tensor) -> torch.Tensor:
        """[B, N, N] adjacency -> [B, 1, N, N] attention mask: the edges and every node's self loop."""
        eye = torch.eye(adj.shape[-1], dtype=torch.bool, device=adj.device)
        return (adj | eye)[:, None]

    def _split(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, n, dim = x.shape
        return self.qkv(x).view(b, n, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)

    def attention_weights(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        """[B, heads, N, N] attention weights of the masked attention (Eq. 7) for node states ``x``: what
        ``forward`` computes inside the fused kernel, spelt out for inspection."""
        q, k, _ = self._split(x)
        logits = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        return logits.masked_fill(~self.attend(adj), float("-inf")).softmax(-1)

    def forward(self, x: torch.Tensor, adj: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x [B, N, E] node states, adj [B, N, N] bool edges (no self loops), mask [B, N] real nodes."""
        if self.aggregator == "attention":
            q, k, v = self._split(x)
            att = F.scaled_dot_product_attention(
                q, k, v, attn_mask=self.attend(adj), dropout_p=self.dropout if self.training else 0.0
            )
            agg = self.out(att.transpose(1, 2).reshape(x.shape))
        else:
            # GCN normalises over the node's own loop (it sets the diagonal itself); GIN and GraphSAGE add the
            # node's own state through their root term, so their adjacency has no loops
            agg = self.conv(x, adj.to(x.dtype), mask)
        x = self.norm1(x + self.drop1(agg))
        return self.norm2(x + self.drop2(self.ff(x)))
