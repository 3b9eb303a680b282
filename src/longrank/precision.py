"""Reduced-precision inference: ``rerank.precision`` and the speed benches' ``--precision`` run the forward under
``torch.autocast`` (weights stay fp32; matrix products and attention run in the half type). bf16 keeps fp32's
exponent range, so scores of any size survive it; fp16 has more mantissa but overflows past 65,504 and is meant for
GPUs (CPU kernels for it are slow or missing)."""

from __future__ import annotations

import contextlib
from typing import Literal

import torch

from longrank.errors import InputError

Precision = Literal["fp32", "bf16", "fp16"]
AUTOCAST_DTYPES: dict[str, torch.dtype | None] = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def autocast_dtype(precision: str) -> torch.dtype | None:
    try:
        return AUTOCAST_DTYPES[precision]
    except KeyError:
        raise InputError(f"precision: expected one of {sorted(AUTOCAST_DTYPES)}, got {precision!r}") from None


def autocast(device: torch.device | str, precision: str) -> contextlib.AbstractContextManager:
    """``torch.autocast`` on ``device`` in ``precision``'s type; fp32: no autocast at all (not a disabled one, so
    an outer autocast, if any, still applies)."""
    dtype = autocast_dtype(precision)
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=dtype)
