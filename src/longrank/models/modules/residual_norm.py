"""BERT's sub-layer output, ``LayerNorm(dense(x) + residual)``, with the add and the norm in one kernel on CUDA, and
under half-precision autocast the half copy that the next linear layer reads written by the same kernel.

Why: MORES scores 1,000 candidates with 16 query tokens each, so each interaction block moves a [16,000, hidden]
residual stream through three sub-layers. Under bf16 autocast the stream stays fp32 (autocast runs LayerNorm in
fp32) and every sub-layer costs an add (bf16 + fp32 -> fp32), a LayerNorm and, before the next linear layer, a cast
of the fp32 result to bf16: three passes over the stream where one suffices. On an H100 these elementwise kernels
were ~1 ms of a 5.2 ms bf16 Reuse-S2 pass (docs/studies/speed.md, "MORES on the GPU").

The kernel computes what PyTorch computes: the sum in fp32 (a bf16 value widens exactly), the mean and variance in
fp32 (PyTorch's Welford sums in another order: equal within fp32 rounding), the output in the sum's type, and the
half copy as autocast casts (round to nearest even). The CPU and training keep HF's module (``module(x, residual)``).
"""

from __future__ import annotations

import torch

try:  # Triton ships with CUDA builds of PyTorch; the CPU build has none and never needs it
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the torch build
    triton = None

HALF_TYPES = (torch.bfloat16, torch.float16)


def fused_norm_available(device: torch.device) -> bool:
    return triton is not None and torch.device(device).type == "cuda" and not torch.is_grad_enabled()


def output_norm(module, hidden: torch.Tensor, residual: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``module`` (a BertSelfOutput or BertOutput: ``.dense``, ``.LayerNorm``) applied to ``hidden`` and
    ``residual`` at inference: ``(out, half)``, ``half`` the copy of ``out`` in autocast's half type that a following
    linear layer would cast (``out`` itself outside half autocast)."""
    if not fused_norm_available(hidden.device) or module.training:
        out = module(hidden, residual)
        return out, out
    return add_layer_norm(module.dense(hidden), residual, module.LayerNorm)


def add_layer_norm(y: torch.Tensor, residual: torch.Tensor, norm) -> tuple[torch.Tensor, torch.Tensor]:
    """``norm(y + residual)`` for ``[B, M, N]`` tensors (``residual`` may be a stride-0 expansion over B), and its
    half copy (see ``output_norm``)."""
    batch, m, n = y.shape
    out_dtype = torch.result_type(y, residual)
    device_type = y.device.type
    half = torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else None
    half = half if half in HALF_TYPES and out_dtype not in HALF_TYPES else None
    y = y if y.stride(-1) == 1 else y.contiguous()
    residual = residual if residual.stride(-1) == 1 else residual.contiguous()
    out = torch.empty(batch, m, n, device=y.device, dtype=out_dtype)
    copy = torch.empty(batch, m, n, device=y.device, dtype=half) if half is not None else out
    _add_layer_norm[(batch * m,)](
        y,
        residual,
        norm.weight,
        norm.bias,
        out,
        copy,
        y.stride(0),
        y.stride(1),
        residual.stride(0),
        residual.stride(1),
        m,
        n,
        norm.eps,
        BLOCK=triton.next_power_of_2(n),
        HALF=half is not None,
    )
    return out, copy


if triton is not None:

    @triton.jit
    def _add_layer_norm(
        Y,
        R,
        W,
        B,
        Out,
        Half,
        stride_yb,
        stride_ym,
        stride_rb,
        stride_rm,
        M,
        N,
        eps,
        BLOCK: tl.constexpr,
        HALF: tl.constexpr,
    ):
        """One row: x = y + r in fp32, (x - mean) / sqrt(var + eps) * w + b, stored in Out's type (and Half's)."""
        row = tl.program_id(0).to(tl.int64)
        b = row // M
        m = row % M
        cols = tl.arange(0, BLOCK)
        keep = cols < N
        y = tl.load(Y + b * stride_yb + m * stride_ym + cols, mask=keep, other=0.0).to(tl.float32)
        r = tl.load(R + b * stride_rb + m * stride_rm + cols, mask=keep, other=0.0).to(tl.float32)
        x = y + r
        mean = tl.sum(x, 0) / N
        centred = tl.where(keep, x - mean, 0.0)
        var = tl.sum(centred * centred, 0) / N
        w = tl.load(W + cols, mask=keep, other=0.0).to(tl.float32)
        bias = tl.load(B + cols, mask=keep, other=0.0).to(tl.float32)
        out = centred * (1.0 / tl.sqrt(var + eps)) * w + bias
        tl.store(Out + row * N + cols, out.to(Out.dtype.element_ty), mask=keep)
        if HALF:
            # autocast's cast of the stored value: from the value in Out's type, rounded to nearest even
            tl.store(Half + row * N + cols, out.to(Out.dtype.element_ty).to(Half.dtype.element_ty), mask=keep)
