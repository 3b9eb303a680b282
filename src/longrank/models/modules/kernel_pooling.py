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


# Where float32's exp underflows (an argument below -87.34 gives a subnormal number or 0), the CPU's vectorised exp
# takes a path ~10x slower than for any other argument, and most of a kernel tensor's entries are there (a cosine more
# than 1.32 from a kernel's centre at sigma 0.1; almost every one at the exact-match kernel's 0.001). Without autograd
# (reranking, dev evaluations, benches, NDRM's impact index) the argument is floored at -87 first: those entries become
# exp(-87) = 1.6e-38 instead of a subnormal or 0. No model can tell the two apart: each one's kernel sums reach its
# score through a floor or an addend of at least 1e-10 (KNRM's and TK's clamp, TKL's MIN_X, NDRM's 1e-6) or a sum with
# terms of normal size, where a few 1e-38 are far below float32's last digit. With autograd the exact exp is kept, so
# that no subnormal gradient a training step sees changes.
EXP_FLOOR = -87.0


def gaussian(exponent: torch.Tensor) -> torch.Tensor:
    """exp(``exponent``) of RBF kernel exponents (all <= 0); in place, floored at ``EXP_FLOOR``, without autograd."""
    if exponent.requires_grad:
        return torch.exp(exponent)
    return exponent.clamp_(min=EXP_FLOOR).exp_()


def rbf_kernels(cosine: torch.Tensor, mu: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """[..., Lq, Ld] cosine similarities -> [..., Lq, Ld, K] kernel activations (Eq. 2 of TKL)."""
    return gaussian(-((cosine.unsqueeze(-1) - mu) ** 2) / (2 * sigma**2))


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
