"""Position features (TK, TKL)."""

from __future__ import annotations

import math

import torch


def sinusoidal_positions(length: int, dim: int, device=None) -> torch.Tensor:
    """[length, dim] sine/cosine position features (Vaswani et al.), computed on the fly so any length works."""
    position = torch.arange(length, dtype=torch.float32, device=device)[:, None]
    half = (dim + 1) // 2
    freq = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32, device=device) / max(1, half))
    angles = position * freq
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)[:, :dim]
