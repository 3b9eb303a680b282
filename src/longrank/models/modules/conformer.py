"""The Conformer layer of the Conformer-Kernel model (Mitra, Hofstätter, Zamani and Craswell, "Improving
Transformer-Kernel Ranking Model Using Conformer and Query Term Independence", SIGIR 2021, Sec. 3), NDRM's
document encoder; the attention scaling bench runs the same layer with three attentions.

- Eq. 2, separable self-attention: Φ(Q) · (Φ(Kᵀ) · V), Φ(Q) a softmax over the key (feature) dimension and
  Φ(Kᵀ) one over the sequence. A = Φ(Kᵀ)V is d_key × d_value per head, so memory is O(n · d_key): no
  n × n matrix is ever made (``separable_attention``; tests/test_conformer.py records every intermediate's
  shape to check it).
- The layer (Sec. 3 "we apply grouped convolution before the separable self-attention"): a grouped 1-D
  convolution over the sequence (window 31, 32 groups) whose output the self-attention reads, one residual
  around the two, layer norm, a ReLU feed-forward with its own residual and layer norm (post-norm, as TK's
  ``EncoderLayer``), dropout 0.2 on both residual branches.

Choices where the paper is silent, with the reason:
- The convolution has no residual of its own: it only feeds the attention, and the residual adds the
  layer's input (as the authors' released code, bmitra-msft/TREC-Deep-Learning-Quick-Start, does).
- Q and K have their own projections as Eq. 2 writes them (the official code shares one projection for
  both); Eq. 2 has no 1/√d temperature, so the separable attention has none (a learned projection
  absorbs any scale). The fused (``sdpa``) and written-out (``materialised``) alternatives are Eq. 1 with
  its usual 1/√d.
- No dropout inside the attention, only on its output: the three attentions then differ in nothing but
  the attention itself, which is what the scaling bench compares (attention-weight dropout would add
  another n × n tensor to the materialised one only).
- Feed-forward width ``ff`` defaults to the hidden width: the paper sets "all hidden layer sizes to 256".
- Padding: positions outside the document are zeroed before every convolution (so a document's vectors
  never depend on how far its batch is padded) and masked out of the keys of every attention. A row with
  no real token attends over its padding instead (its output is zeroed, never NaN). ``convolve_padding:
  true`` is the authors' code instead: padding keeps its vectors (its embedding plus position, then each
  layer's output there) into the next convolution, so the terms near a document's end see them; attention
  keys stay masked, as theirs (``src_key_padding_mask``). NDRM's full-scale configs use it, with documents
  padded to ``max_doc_len`` as the authors' (``score_padding_windows``).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from longrank.errors import InputError

ATTENTIONS = ("separable", "sdpa", "materialised")


def _attendable(mask: torch.Tensor | None, shape: tuple[int, ...], device) -> torch.Tensor:
    """[B, n] bool keys that may be attended to; rows without any real key attend to all (never NaN)."""
    if mask is None:
        return torch.ones(shape[0], shape[2], dtype=torch.bool, device=device)
    mask = mask.bool()
    return mask | ~mask.any(dim=1, keepdim=True)


def separable_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Eq. 2: softmax(Q over its last, key dimension) · (softmax(K over the sequence, padding masked)ᵀ · V).

    q, k [B, H, n, d_key], v [B, H, n, d_value], mask [B, n] (true/1 for real tokens) -> [B, H, n, d_value].
    The largest intermediate is n × d per head; A = Φ(Kᵀ)V is [B, H, d_key, d_value]."""
    attend = _attendable(mask, q.shape, q.device)[:, None, :, None]  # [B, 1, n, 1]
    keys = torch.softmax(k.masked_fill(~attend, float("-inf")), dim=-2)  # over the sequence
    a = keys.transpose(-2, -1) @ v  # [B, H, d_key, d_value]
    return torch.softmax(q, dim=-1) @ a


def materialised_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Eq. 1 written out as in 2020: softmax(QKᵀ/√d) · V with the n × n matrix in memory."""
    attend = _attendable(mask, q.shape, q.device)[:, None, None, :]  # [B, 1, 1, n]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return torch.softmax(scores.masked_fill(~attend, float("-inf")), dim=-1) @ v


def sdpa_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Eq. 1 through PyTorch's fused ``scaled_dot_product_attention`` (flash / memory-efficient kernels)."""
    attend = None if mask is None else _attendable(mask, q.shape, q.device)[:, None, None, :]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attend)


ATTENTION_FUNCTIONS = {"separable": separable_attention, "sdpa": sdpa_attention, "materialised": materialised_attention}


class ConformerLayer(nn.Module):
    """Grouped 1-D convolution -> self-attention (+ residual, layer norm) -> feed-forward (+ residual, layer
    norm); see the module docstring. ``attention`` picks the self-attention: ``separable`` (Eq. 2, the
    Conformer's), ``sdpa`` (fused Eq. 1) or ``materialised`` (Eq. 1 with the n × n matrix). The keyword
    defaults are the paper's (Sec. 4) and NDRM's config defaults."""

    def __init__(
        self,
        hidden: int,
        heads: int,
        conv_window: int = 31,
        conv_groups: int = 32,
        ff: int | None = None,
        dropout: float = 0.2,
        attention: str = "separable",
        convolve_padding: bool = False,
    ):
        super().__init__()
        if attention not in ATTENTIONS:
            raise InputError(f"attention: {attention!r} is not one of {list(ATTENTIONS)}")
        if hidden % heads:
            raise InputError(f"n_heads: {heads} heads must divide the hidden width {hidden}")
        if hidden % conv_groups:
            raise InputError(f"conv_groups: {conv_groups} groups must divide the hidden width {hidden}")
        if conv_window < 1 or conv_window % 2 == 0:
            raise InputError(
                f"conv_window: must be a positive odd number (the output keeps the input's length), got {conv_window}"
            )
        self.heads, self.attention, self.convolve_padding = heads, attention, bool(convolve_padding)
        self.attend = ATTENTION_FUNCTIONS[attention]
        self.conv = nn.Conv1d(hidden, hidden, conv_window, padding=conv_window // 2, groups=conv_groups)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        ff = hidden if ff is None else ff
        self.ff = nn.Sequential(nn.Linear(hidden, ff), nn.ReLU(), nn.Dropout(dropout), nn.Linear(ff, hidden))
        self.norm1, self.norm2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.drop1, self.drop2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x [B, n, hidden], mask [B, n] (1 for real tokens; None: all real) -> [B, n, hidden], padding zeroed
        (kept, with ``convolve_padding``)."""
        batch, length, hidden = x.shape
        keep = None if mask is None or self.convolve_padding else mask.to(x.dtype)[..., None]
        if keep is not None:
            x = x * keep
        local = self.conv(x.transpose(1, 2)).transpose(1, 2)
        q, k, v = self.qkv(local).view(batch, length, 3, self.heads, hidden // self.heads).permute(2, 0, 3, 1, 4)
        attended = self.attend(q, k, v, mask).transpose(1, 2).reshape(batch, length, hidden)
        x = self.norm1(x + self.drop1(self.out(attended)))
        x = self.norm2(x + self.drop2(self.ff(x)))
        return x if keep is None else x * keep
