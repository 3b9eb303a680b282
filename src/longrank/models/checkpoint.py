"""Model weights as safetensors checkpoints (never pickle), and rebuilding a trained model from its config
entry and its weights. The resumable training state (optimiser, scheduler, position) is
:mod:`longrank.train.checkpoint`'s."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from longrank.io import InputError, atomic_path
from longrank.models.registry import build_model


def _model_class(model: torch.nn.Module) -> str:
    return f"{type(model).__module__}.{type(model).__qualname__}"


def save_weights(model: torch.nn.Module, path: str | Path) -> None:
    """Write the weights with the model's class in the header, so that loading them into another kind of model
    is refused by name rather than by a list of missing tensors."""
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    with atomic_path(path) as tmp:
        save_file(state, str(tmp), metadata={"model_class": _model_class(model)})


def load_weights(model: torch.nn.Module, path: str | Path) -> None:
    """Load safetensors weights into ``model``. Anything else (a pickled ``torch.save`` file, a truncated
    file) is refused without being unpickled; so are weights of another model class or of other shapes."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"checkpoint {path} not found; train the model first")
    try:
        with safe_open(str(path), framework="pt") as f:
            saved_class = (f.metadata() or {}).get("model_class")
        state = load_file(str(path))
    except SafetensorError as err:
        raise InputError(f"checkpoint {path} is not a safetensors file ({err}); weights are only read from safetensors, "
                         "never unpickled") from None
    if saved_class is not None and saved_class != _model_class(model):
        raise InputError(f"checkpoint {path} holds a {saved_class} model's weights; the config builds a {_model_class(model)}")
    own = model.state_dict()
    resized = [f"{k} {tuple(state[k].shape)} vs {tuple(own[k].shape)}" for k in own if k in state and state[k].shape != own[k].shape]
    if resized:
        raise InputError(f"checkpoint {path} was trained with other sizes than the configured model (saved vs configured): "
                         + "; ".join(resized[:5]))
    # not strict: a model's load hooks may map saved keys (MORES's tied query layers); what is left over is checked here
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise InputError(f"checkpoint {path} does not fit the configured model: missing {missing[:5]}, unexpected {unexpected[:5]}")


def load_model(checkpoint: str | Path, model_cfg: dict, corpus, device: torch.device | str = "cpu"):
    """Rebuild the configured model and load trained weights into it (eval mode)."""
    model = build_model(model_cfg, corpus)
    load_weights(model, checkpoint)
    return model.to(device).eval()
