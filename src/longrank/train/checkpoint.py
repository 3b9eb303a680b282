"""Safetensors checkpoints (never pickle): the model weights, and for resuming, the optimiser state
flattened into tensors plus a JSON sidecar with the training position."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from longrank.io import InputError, atomic_path, write_json
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


def save_training_state(directory: Path, model, optimizer, scheduler, position: dict) -> None:
    """Everything needed to resume: weights, optimiser moments, scheduler and the loop's position."""
    directory.mkdir(parents=True, exist_ok=True)
    save_weights(model, directory / "last.safetensors")
    tensors, meta = {}, {"param_groups": optimizer.state_dict()["param_groups"], "state_keys": {}}
    for param_id, state in optimizer.state_dict()["state"].items():
        meta["state_keys"][str(param_id)] = sorted(state)
        for key, value in state.items():
            tensors[f"{param_id}.{key}"] = torch.as_tensor(value).detach().cpu().contiguous()
    with atomic_path(directory / "optimizer.safetensors") as tmp:
        save_file(tensors, str(tmp))
    meta["scheduler"] = scheduler.state_dict() if scheduler is not None else None
    write_json(directory / "optimizer.json", meta)
    write_json(directory / "position.json", position)  # written last: its presence marks a complete state


def load_training_state(directory: Path, model, optimizer, scheduler) -> dict | None:
    position_file = directory / "position.json"
    if not position_file.exists():
        return None
    load_weights(model, directory / "last.safetensors")
    tensors = load_file(str(directory / "optimizer.safetensors"))
    meta = json.loads((directory / "optimizer.json").read_text())
    state = {int(pid): {k: tensors[f"{pid}.{k}"] for k in keys} for pid, keys in meta["state_keys"].items()}
    optimizer.load_state_dict({"state": state, "param_groups": meta["param_groups"]})
    if scheduler is not None and meta["scheduler"] is not None:
        scheduler.load_state_dict(meta["scheduler"])
    return json.loads(position_file.read_text())
