"""The resumable training state as safetensors (never pickle): the model's last weights, the optimiser state
flattened into tensors, and a JSON sidecar with the scheduler and the training position. Model weights
themselves (and loading a trained model) are :mod:`longrank.models.checkpoint`'s."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from longrank.io import atomic_path, write_json
from longrank.models.checkpoint import load_weights, save_weights


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
