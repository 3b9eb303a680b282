"""Model weights as safetensors checkpoints (never pickle), and rebuilding a trained model from its config
entry and its weights. The resumable training state (optimiser, scheduler, position) is
:mod:`longrank.train.train_state`'s.

Every weights file is written with a manifest beside it (``model.safetensors`` -> ``model.manifest.json``: its size
and SHA-256), and read only if it still matches: a truncated or bit-flipped file is refused by name, never scored
with. The records are :mod:`longrank.results.file_records`'s, which verify the training state's checkpoint sets too."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from longrank.results.file_records import check_records, file_record
from longrank.errors import InputError
from longrank.io.atomic import atomic_path
from longrank.io.json_yaml import write_json
from longrank.models.registry import build_model

MANIFEST_SUFFIX = ".manifest.json"


def manifest_path(weights: str | Path) -> Path:
    """``dir/model.safetensors`` -> ``dir/model.manifest.json``."""
    weights = Path(weights)
    return weights.with_name(weights.name.removesuffix(".safetensors") + MANIFEST_SUFFIX)


def write_manifest(weights: str | Path, record: dict | None = None) -> None:
    """Record the weights file's size and hash beside it (``record``: already computed, e.g. by a checkpoint set)."""
    weights = Path(weights)
    write_json(manifest_path(weights), {"files": {weights.name: record or file_record(weights)}})


def verify_weights(path: str | Path, require_manifest: bool = False) -> None:
    """Refuse a weights file its manifest does not vouch for: missing, truncated, changed. Without a manifest the file
    is refused only if ``require_manifest`` (the rerank stage: the train stage always writes one)."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"checkpoint {path} not found; train the model first")
    manifest = manifest_path(path)
    if not manifest.exists():
        if require_manifest:
            raise InputError(
                f"checkpoint {path} has no manifest ({manifest.name}: its size and SHA-256, which the train "
                "stage writes beside it); it cannot be checked, so it is not used: train the model again"
            )
        return
    try:
        records = json.loads(manifest.read_text())["files"]
        problems = check_records(path.parent, {path.name: records[path.name]})
    except (ValueError, KeyError, TypeError) as err:
        problems = [f"the manifest {manifest} is unreadable ({type(err).__name__}: {err})"]
    if problems:
        raise InputError(
            f"checkpoint {path} is corrupt: {'; '.join(problems)}; delete it and its manifest and train the model again"
        )


def _model_class(model: torch.nn.Module) -> str:
    return f"{type(model).__module__}.{type(model).__qualname__}"


def save_weights(model: torch.nn.Module, path: str | Path, manifest: bool = True) -> None:
    """Write the weights with the model's class in the header, so that loading them into another kind of model
    is refused by name rather than by a list of missing tensors, and their manifest beside them (``manifest=False``:
    a checkpoint set records the file in its own manifest)."""
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    with atomic_path(path) as tmp:
        save_file(state, str(tmp), metadata={"model_class": _model_class(model)})
    if manifest:
        write_manifest(path)


def load_weights(
    model: torch.nn.Module, path: str | Path, require_manifest: bool = False, vocabulary_rows: int | None = None
) -> None:
    """Load safetensors weights into ``model``. Anything else (a pickled ``torch.save`` file, a truncated
    file) is refused without being unpickled; so are weights of another model class or of other shapes, and a file
    its manifest, where it has one, does not vouch for.

    ``vocabulary_rows``: ``model`` was built over a larger vocabulary than it was trained on (an export's pre-trained
    words after the trained ones, :mod:`longrank.api`): a saved tensor of that many rows whose model tensor has more
    rows and the same other sizes fills the first rows; the rows after keep the model's own initial values (the
    embedding's are overwritten with the pre-trained vectors by the caller)."""
    path = Path(path)
    verify_weights(path, require_manifest)
    try:
        with safe_open(str(path), framework="pt") as f:
            saved_class = (f.metadata() or {}).get("model_class")
        state = load_file(str(path))
    except SafetensorError as err:
        raise InputError(
            f"checkpoint {path} is not a safetensors file ({err}); weights are only read from safetensors, "
            "never unpickled"
        ) from None
    if saved_class is not None and saved_class != _model_class(model):
        raise InputError(
            f"checkpoint {path} holds a {saved_class} model's weights; the config builds a {_model_class(model)}"
        )
    own = model.state_dict()
    if vocabulary_rows is not None:
        state = {k: _grown(v, own.get(k), vocabulary_rows) for k, v in state.items()}
    resized = [
        f"{k} {tuple(state[k].shape)} vs {tuple(own[k].shape)}"
        for k in own
        if k in state and state[k].shape != own[k].shape
    ]
    if resized:
        raise InputError(
            f"checkpoint {path} was trained with other sizes than the configured model (saved vs configured): "
            + "; ".join(resized[:5])
        )
    # not strict: a model's load hooks may map saved keys (MORES's tied query layers); what is left over is checked here
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise InputError(
            f"checkpoint {path} does not fit the configured model: missing {missing[:5]}, unexpected {unexpected[:5]}"
        )


def _grown(saved: torch.Tensor, own: torch.Tensor | None, rows: int) -> torch.Tensor:
    """``saved`` (``rows`` vocabulary rows) over the first rows of the model's larger ``own`` tensor; any other
    tensor as it was saved (a shape that differs otherwise is refused by the caller)."""
    if (
        own is None
        or saved.dim() == 0
        or saved.shape[0] != rows
        or own.shape[0] <= rows
        or saved.shape[1:] != own.shape[1:]
    ):
        return saved
    grown = own.detach().clone().to(saved.dtype)
    grown[:rows] = saved
    return grown


def load_model(
    checkpoint: str | Path,
    model_cfg: dict,
    corpus,
    device: torch.device | str = "cpu",
    require_manifest: bool = False,
    name: str | None = None,
):
    """Rebuild the configured model and load trained weights into it (eval mode); ``require_manifest``: refuse weights
    without a manifest too (the rerank stage's trained models always have one); ``name``: the entry's (build_model)."""
    model = build_model(model_cfg, corpus, name)
    load_weights(model, checkpoint, require_manifest)
    return model.to(device).eval()
