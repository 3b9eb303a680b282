"""Device choice and seeding shared by training, reranking and benchmarking."""

from __future__ import annotations

import random

import numpy as np
import torch

from longrank.io import InputError


def resolve_device(name: str = "auto") -> torch.device:
    """``auto`` picks the GPU when there is one and the CPU otherwise; ``cpu`` / ``cuda`` / ``cuda:N`` force it."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(f"device: {name!r} was asked for but no CUDA GPU is visible; use 'auto' or 'cpu'")
    try:
        return torch.device(name)
    except RuntimeError:
        raise InputError(f"device: {name!r} is not a device; expected 'auto', 'cpu' or 'cuda[:N]'") from None


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
