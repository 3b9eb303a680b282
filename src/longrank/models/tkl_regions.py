"""TKL's regions (:mod:`longrank.models.tkl`): sums over sliding regions of the document (Eq. 3), the learned
saturation a * x^(1/b) - c (Eq. 4) and the greedy top-local-max over the relevance topography (Eq. 7)."""

from __future__ import annotations

import torch
from torch.nn import functional as F

MIN_X = 1e-10  # the clamp of x before its root (KNRM's): 100 x^(0.01) - 100 at 1e-10 is -20.6 ~ ln 1e-10


# ---- Eq. 3-4: regions and saturation -- ----------------------------------------------------------------------


def region_sums(values: torch.Tensor, region_size: int, stride: int = 1) -> torch.Tensor:
    """Sums over sliding regions along the last dimension: [..., L] -> [..., R], R = (max(L, r) - r) // stride + 1.
    A float64 running sum makes this O(L) while staying exact to ~1e-12: a float32 running sum would leave
    cancellation noise of ~1e-4 on regions without matches, which x^(1/100) turns into large values."""
    length = values.shape[-1]
    if length < region_size:
        values = F.pad(values, (0, region_size - length))
        length = region_size
    running = F.pad(values.double().cumsum(dim=-1), (1, 0))
    sums = running[..., region_size::stride] - running[..., : length - region_size + 1 : stride]
    return sums.to(values.dtype)


def saturate(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """Eq. 4: a * x^(1/b) - c, NaN-free: x clamped to >= 1e-10, b to >= 1. b = 1 gives a * x - c."""
    x = torch.clamp(x, min=MIN_X)
    return a * torch.exp(torch.log(x) / torch.clamp(b, min=1.0)) - c


# ---- Eq. 7: top-local-max ---------------------------------------------------------------------------------


def top_local_max(
    topography: torch.Tensor, valid: torch.Tensor, top_t: int, neighbours: int, radius: int, stride: int = 1
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Greedy top-t maxima of [B, R] ``topography`` over ``valid`` [B, R] regions, suppressing every region
    starting less than ``radius`` tokens from a chosen one. Returns features [B, t * (2f + 1)] (per maximum:
    f left values, the peak, f right values), region indices [B, t] (-1 where none was left) and peak values
    [B, t] (0 where none)."""
    batch, n_regions = topography.shape
    index = torch.arange(n_regions, device=topography.device)
    offsets = torch.arange(-neighbours, neighbours + 1, device=topography.device)
    last_valid = valid.sum(dim=1, keepdim=True) - 1  # a document's regions are a prefix of the topography
    available = valid.clone()
    features, positions, peaks = [], [], []
    for _ in range(top_t):
        found = available.any(dim=1, keepdim=True)
        peak = topography.masked_fill(~available, float("-inf")).argmax(dim=1, keepdim=True)
        around = torch.minimum((peak + offsets).clamp(min=0), last_valid.clamp(min=0))
        values = topography.gather(1, around) * found
        features.append(values)
        peaks.append(values[:, neighbours])
        positions.append(torch.where(found[:, 0], peak[:, 0], torch.full_like(peak[:, 0], -1)))
        available = available & ((index[None, :] - peak).abs() * stride >= radius)
    return torch.cat(features, dim=1), torch.stack(positions, dim=1), torch.stack(peaks, dim=1)
