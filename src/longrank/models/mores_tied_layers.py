"""How MORES (:mod:`longrank.models.mores`) saves and loads its query module's layers with ``tie_query_layers``:
tied, they are the document module's first L-K layer objects, saved once under ``document_module.`` and read back
from there; a checkpoint saved with the other setting is refused with the key to set."""

from __future__ import annotations

import torch

from longrank.errors import InputError

QUERY_LAYERS = "query_module.encoder.layer."  # state-dict prefix of the query module's layers (tied: not saved)
DOC_LAYERS = "document_module.encoder.layer."


def drop_tied_query_layers(module, state_dict, prefix, local_metadata) -> None:
    """state_dict post-hook: a tied layer is saved once, under ``document_module.`` (safetensors refuses two
    names for one storage, and one name per weight is what there is)."""
    if module.tie_query_layers:
        for key in [k for k in state_dict if k.startswith(prefix + QUERY_LAYERS)]:
            del state_dict[key]


def load_query_layers(
    module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
) -> None:
    """load_state_dict pre-hook. Tied: the query module's layers read the document module's first L-K layers'
    entries. A checkpoint saved with the other ``tie_query_layers`` is refused with the key to set."""
    doc_keys = [k for k in state_dict if k.startswith(prefix + DOC_LAYERS)]
    has_query_layers = any(k.startswith(prefix + QUERY_LAYERS) for k in state_dict)
    if not module.tie_query_layers:
        if doc_keys and not has_query_layers:
            raise InputError(
                "tie_query_layers: the checkpoint was saved with tied query layers (tie_query_layers: true); "
                "set tie_query_layers: true to load it"
            )
        return
    split = len(module.query_module.encoder.layer)
    for key in doc_keys:
        index, rest = key[len(prefix + DOC_LAYERS) :].split(".", 1)
        if int(index) >= split:
            continue
        query_key = f"{prefix}{QUERY_LAYERS}{index}.{rest}"
        if query_key in state_dict and not torch.equal(
            state_dict[query_key].to(state_dict[key].device), state_dict[key]
        ):
            raise InputError(
                "tie_query_layers: the checkpoint has query-module layers of their own (it was saved with "
                "tie_query_layers: false); set tie_query_layers: false to load it"
            )
        state_dict[query_key] = state_dict[key]
