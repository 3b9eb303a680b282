"""Model weights as safetensors checkpoints (never pickle), and rebuilding a trained model from its config
entry and its weights. The resumable training state (optimiser, scheduler, position) is
:mod:`longrank.train.checkpoint`'s."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from longrank.io import InputError, atomic_path
from longrank.models.registry import build_model


def save_weights(model: torch.nn.Module, path: str | Path) -> None:
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    with atomic_path(path) as tmp:
        save_file(state, str(tmp))


def load_weights(model: torch.nn.Module, path: str | Path) -> None:
    try:
        state = load_file(str(path))
    except FileNotFoundError:
        raise InputError(f"checkpoint {path} not found; train the model first") from None
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise InputError(f"checkpoint {path} does not fit the configured model: missing {missing[:5]}, unexpected {unexpected[:5]}")


def load_model(checkpoint: str | Path, model_cfg: dict, corpus, device: torch.device | str = "cpu"):
    """Rebuild the configured model and load trained weights into it (eval mode)."""
    model = build_model(model_cfg, corpus)
    load_weights(model, checkpoint)
    return model.to(device).eval()
