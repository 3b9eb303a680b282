"""Kernel pooling (KNRM, TK, TKL): RBF kernels over the cosine similarities of query and document vectors."""

from __future__ import annotations

import torch
from torch import nn


def kernel_centers(
    n_kernels: int = 11, sigma: float = 0.1, exact_sigma: float = 0.001
) -> tuple[torch.Tensor, torch.Tensor]:
    """KNRM's kernels: one exact-match kernel at mu = 1 (sigma 0.001) and ``n_kernels - 1`` soft kernels
    centred at 0.9, 0.7, ..., -0.9 (for 11 kernels) with ``sigma``. Returns (mu, sigma), each [K]."""
    soft = n_kernels - 1
    step = 2.0 / soft
    mus = [1.0] + [1.0 - step / 2 - i * step for i in range(soft)]
    sigmas = [exact_sigma] + [sigma] * soft
    return torch.tensor(mus), torch.tensor(sigmas)


def rbf_kernels(cosine: torch.Tensor, mu: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """[..., Lq, Ld] cosine similarities -> [..., Lq, Ld, K] kernel activations (Eq. 2 of TKL)."""
    return torch.exp(-((cosine.unsqueeze(-1) - mu) ** 2) / (2 * sigma**2))


def cosine_matrix(q: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """[B, Lq, E] x [B, Ld, E] -> [B, Lq, Ld] cosine similarities (padding vectors give 0, not NaN). Always in fp32,
    also under autocast (rerank.precision): bf16 keeps 3 significant digits, and the kernels read differences of
    0.01 near a cosine of 1 (the exact-match kernel), which bf16 would round away."""
    with torch.autocast(q.device.type, enabled=False):
        qn = nn.functional.normalize(q.float(), dim=-1, eps=1e-8)
        dn = nn.functional.normalize(d.float(), dim=-1, eps=1e-8)
        return torch.bmm(qn, dn.transpose(1, 2))


def tk_kernels(n_kernels: int = 11, sigma: float = 0.1, exact_sigma: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """TK/TKL's kernels: every sigma 0.1, the exact-match kernel's too (see ``longrank.models.tk``); the keyword
    defaults are the config defaults."""
    return kernel_centers(n_kernels, sigma, exact_sigma)
