"""Model registry: loads the class that implements a config entry's ``type:`` (one paper model per file) and builds
the model an entry describes.

What the workflow asks of a type without building one is in the torch-free table ``longrank.config.model_types``; each class
is checked against its row there the first time it is loaded (``check_row``). Imports are lazy so that a workflow
using only KNRM never imports transformers.
"""

from __future__ import annotations

import importlib
import inspect
from functools import cache
from typing import Any

from longrank.errors import InputError
from longrank.config.model_types import MODEL_TYPES, architecture_defaults, architecture_params, model_type
from longrank.config.user_models import is_user

# The class that implements each type of longrank.config.model_types (``module:Class``), imported when first asked for: the
# module's code is an input of the model's training and reranking jobs (``model_module``)
IMPLEMENTATIONS = {
    "knrm": "longrank.models.knrm:KNRM",
    "tk": "longrank.models.tk:TK",
    "tkl": "longrank.models.tkl:TKL",
    "ndrm": "longrank.models.ndrm:NDRM",
    "bert_ranker": "longrank.models.bert_ranker:BertRanker",
    "mores": "longrank.models.mores:MORES",
    "bi_encoder": "longrank.models.bi_encoder:BiEncoder",
    "mir": "longrank.models.mir:MIR",
}
if set(IMPLEMENTATIONS) != set(MODEL_TYPES):
    raise ImportError(
        f"longrank.config.model_types and the registry list different model types: {set(IMPLEMENTATIONS) ^ set(MODEL_TYPES)}"
    )

REGENERATE = "python -m longrank.docgen"  # writes longrank/config/model_defaults.py from the classes' signatures


def model_module(name: str) -> str:
    """The module that defines model type ``name`` (its code is an input of its training and reranking)."""
    model_type(name)
    return IMPLEMENTATIONS[name].split(":")[0]


def model_class(name: str):
    model_type(name)
    cls = _load(IMPLEMENTATIONS[name])
    check_row(name, cls)
    return cls


@cache
def _load(implementation: str):
    module_name, class_name = implementation.split(":")
    return getattr(importlib.import_module(module_name), class_name)


def entry_class(model_cfg: dict[str, Any]):
    """The class a configured entry builds: its type's, or the user's class it names (longrank.models.user, imported
    here: the first job that asks, never the workflow's parse)."""
    if is_user(model_cfg):
        from longrank.models.user import user_class

        return user_class(model_cfg)
    return model_class(model_cfg["type"])


def build_model(model_cfg: dict[str, Any], corpus, name: str | None = None):
    """Construct the (untrained) model a config entry describes; ``name``: the entry's, which a user class's errors
    name (``models.<name>: class ...: ...``) where the caller knows it."""
    if is_user(model_cfg):
        from longrank.models.user import build_user_model

        try:
            return build_user_model(model_cfg, architecture_params(model_cfg), corpus)
        except InputError as err:
            raise InputError(f"models.{name}: {err}" if name else str(err)) from err
    return model_class(model_cfg["type"]).from_config(architecture_params(model_cfg), corpus)


def entry_constructor_defaults(model_cfg: dict[str, Any]) -> dict[str, Any]:
    """``constructor_defaults`` of a configured entry: its type's, or those of the user's class it names."""
    if is_user(model_cfg):
        from longrank.models.user import class_keys

        return class_keys(entry_class(model_cfg))
    return constructor_defaults(model_cfg["type"])


def constructor_defaults(name: str) -> dict[str, Any]:
    """The architecture keys model type ``name`` falls back to when its config entry leaves them out, read from its
    class: its constructor's and those of the parts it builds from its config (e.g. TK's embedder and Transformer)."""
    from longrank.models.base import config_keys

    model_type(name)
    cls = _load(IMPLEMENTATIONS[name])
    defaults: dict[str, Any] = {}
    for part in (*cls.config_parts, cls.__init__):
        defaults.update(config_keys(part))
    return {**defaults, **cls.part_defaults}


def row_problems(name: str, cls) -> list[str]:
    """Where the class that implements ``name`` disagrees with its row of longrank.config.model_types."""
    row, problems = model_type(name), []
    if constructor_defaults(name) != architecture_defaults(name):
        problems.append(f"its architecture defaults are not those of longrank/config/model_defaults.py ({REGENERATE})")
    if tuple(sorted(cls.parameter_groups)) != tuple(sorted(row.parameter_groups)):
        problems.append(
            f"it maps parameter groups {sorted(cls.parameter_groups)}, its row lists {row.parameter_groups}"
        )
    if ("encoder" in inspect.signature(cls.__init__).parameters) != row.on_pretrained_encoder:
        problems.append(f"its row says on_pretrained_encoder={row.on_pretrained_encoder}, its constructor disagrees")
    return problems


_CHECKED: set[str] = set()


def check_row(name: str, cls) -> None:
    if name in _CHECKED:
        return
    problems = row_problems(name, cls)
    if problems:
        raise InputError(
            f"model type {name!r} ({cls.__qualname__}) and longrank/config/model_types.py: " + "; ".join(problems)
        )
    _CHECKED.add(name)
