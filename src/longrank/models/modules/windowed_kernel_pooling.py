"""RBF kernels of each query term's cosine row, summed per window of the document (windowed kernel pooling,
Hofstätter et al. 2020a), as NDRM scores its documents (:mod:`longrank.models.ndrm`)."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from longrank.models.modules.kernel_pooling import gaussian

LOG_EPS = 1e-6  # window features: log(kernel sum + 1e-6)


def term_kernels(cosine: torch.Tensor, d_mask: torch.Tensor, mu: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """RBF kernels of each query term's row: cosine [D, T, L], document mask [D, L] -> [D, T, K, L], 0 at padding
    (exactly with autograd; ``gaussian``'s 1.6e-38 without). The [D, T, K, L] block is the largest tensor of NDRM1
    (and of building an impact index), so padding is given a cosine no kernel reaches (exp underflows) rather than
    masked in another pass over it, and without autograd the block is computed in place (2x faster on CPU)."""
    far = 2.0 + 40.0 * float(sigma.max())  # exp(-(40 sigma)^2 / (2 sigma^2)) = exp(-800) = 0
    x = cosine.masked_fill(d_mask[:, None, :] == 0, far)[:, :, None, :] - mu[:, None]
    scale = -0.5 / sigma[:, None] ** 2
    return gaussian(x.square() * scale if x.requires_grad else x.square_().mul_(scale))


def window_count(lengths: torch.Tensor, window: int, stride: int) -> torch.Tensor:
    """Windows of a document of ``lengths`` terms: starts 0, stride, ... until one reaches the end; >= 1."""
    extra = torch.clamp(lengths - window, min=0)
    return 1 + torch.div(extra + stride - 1, stride, rounding_mode="floor")


def aligned_length(length: int, window: int, stride: int) -> int:
    """The length the windows of a ``length``-term sequence span: the last one ends there (>= length)."""
    return (int(window_count(torch.tensor(length), window, stride)) - 1) * stride + window


def kernel_pooling(kernels: torch.Tensor) -> torch.Tensor:
    """Plain kernel pooling of one query term's row: [..., K, L] activations -> [..., K] log(Σ_L + 1e-6)."""
    return torch.log(kernels.sum(dim=-1) + LOG_EPS)


def windowed_kernel_pooling(
    kernels: torch.Tensor, lengths: torch.Tensor, window: int, stride: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Kernel pooling per window: [..., K, L] activations (zero at padding) and document lengths (broadcastable
    to the leading dims) -> features [..., J, K] = log(window sum + 1e-6) and valid [..., J] (windows that start
    inside the document; see ``window_count``). A document shorter than ``window`` has one window whose
    features are ``kernel_pooling``'s. Windows are summed directly (no running sums: no cancellation noise)."""
    length = kernels.shape[-1]
    n_windows = 1 + max(0, -(-(length - window) // stride))
    missing = aligned_length(length, window, stride) - length
    padded = F.pad(kernels, (0, missing)) if missing else kernels  # NDRM pads the (K times smaller) cosines instead
    sums = padded.unfold(-1, window, stride).sum(dim=-1)  # [..., K, J]
    valid = torch.arange(n_windows, device=kernels.device) < window_count(lengths, window, stride)[..., None]
    return torch.log(sums + LOG_EPS).transpose(-1, -2), valid
