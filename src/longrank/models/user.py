"""Loading a researcher's own ranker, the class a config entry names (``class: path/to/file.py:Ranker`` or
``class: package.module:Ranker``; longrank.config.user_models parses and checks the entry without importing it).

Only a job that builds the model imports the class (as ``longrank.models.registry`` imports the papers' models), and
checks it then: it is a ``Ranker``, it declares the text it reads as its entry does, its entry's keys are keys its
signatures take, and its first forward gives one finite score per pair.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from functools import cache
from typing import Any
from collections.abc import Mapping

import torch

from longrank.config.user_models import READS, ClassSpec, parse_class_spec, source_file
from longrank.errors import InputError
from longrank.models.base import Ranker, config_keys


def user_class(entry: Mapping[str, Any]) -> type[Ranker]:
    """The class entry ``entry`` names, imported once, checked against the entry."""
    spec = parse_class_spec("class", entry["class"])
    cls = _load(spec)
    declared = getattr(cls, "reads", None)
    if declared not in READS:
        raise InputError(
            f"class {spec.text!r}: {cls.__qualname__} declares no text it reads; give it the class attribute "
            f"reads = 'words' or 'wordpieces' (its entry says {entry.get('reads')!r})"
        )
    if declared != entry.get("reads"):
        raise InputError(
            f"class {spec.text!r}: {cls.__qualname__}.reads is {declared!r}, but the entry naming it says reads: "
            f"{entry.get('reads')!r}; the workflow cuts documents by the entry's, so the two must agree"
        )
    return cls


@cache
def _load(spec: ClassSpec) -> type[Ranker]:
    try:
        module = _import_file(spec) if spec.is_file else importlib.import_module(spec.target)
    except InputError:
        raise
    except Exception as err:  # the user's code, whatever it raises while it is imported
        raise InputError(f"class {spec.text!r}: importing {spec.target} failed: {type(err).__name__}: {err}") from err
    cls = getattr(module, spec.class_name, None)
    if cls is None:
        raise InputError(f"class {spec.text!r}: {spec.target} defines no {spec.class_name!r}")
    if not (isinstance(cls, type) and issubclass(cls, Ranker)):
        raise InputError(f"class {spec.text!r}: {spec.class_name} is not a subclass of longrank.models.base.Ranker")
    return cls


def _import_file(spec: ClassSpec):
    path = source_file(spec, f"class {spec.text!r}")
    # Its directory on the path, as when the file runs as a script: the modules beside it import by their names
    # (and are part of its code digest: longrank.results.code_digest.user_code)
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    name = f"longrank_user_{path.stem}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    assert module_spec is not None and module_spec.loader is not None  # a .py file always has a loader
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module  # dataclasses and pickling look their module up by name
    module_spec.loader.exec_module(module)
    return module


def class_keys(cls: type[Ranker]) -> dict[str, Any]:
    """The keys a class takes with their defaults: its constructor's and its config parts' (as the papers' models)."""
    keys: dict[str, Any] = {}
    for part in (*cls.config_parts, cls.__init__):
        keys.update(config_keys(part))
    return {**keys, **cls.part_defaults}


def build_user_model(entry: Mapping[str, Any], params: dict[str, Any], corpus) -> Ranker:
    """The model ``entry`` names, built from its architecture keys ``params``; a key none of its signatures take is
    named, and so is a failing ``from_config``; its first forward is checked (``_check_first_scores``)."""
    cls = user_class(entry)
    known = set(class_keys(cls))
    unknown = sorted(set(params) - known)
    if unknown:
        raise InputError(
            f"class {entry['class']!r}: the entry's keys {unknown} are keys of none of {cls.__qualname__}'s "
            f"signatures (__init__ and config_parts); it takes {sorted(known)}"
        )
    try:
        model = cls.from_config(dict(params), corpus)
    except TypeError as err:  # a key its constructor requires and the entry leaves out, most often
        raise InputError(f"class {entry['class']!r}: {cls.__qualname__}.from_config failed: {err}") from err
    hooks: list = []

    def check_once(module, args, kwargs, out) -> None:
        if hooks:  # the first batch only (a deep copy made before it keeps checking: isfinite of a score vector)
            hooks.pop().remove()
        _check_first_scores(entry["class"], kwargs, out)

    hooks.append(model.register_forward_hook(check_once, with_kwargs=True))
    return model


def _check_first_scores(spec: str, batch: dict[str, Any], scores: Any) -> None:
    """Once, at the first forward (training's or reranking's): one finite score per pair."""
    sizes = {len(v) for v in batch.values() if isinstance(v, torch.Tensor) and v.dim() > 0}
    if not isinstance(scores, torch.Tensor) or scores.dim() != 1 or (sizes and scores.shape[0] not in sizes):
        shape = tuple(scores.shape) if isinstance(scores, torch.Tensor) else type(scores).__name__
        raise InputError(f"class {spec!r}: forward returned {shape}; expected scores of shape [batch] {sorted(sizes)}")
    if not torch.isfinite(scores.detach()).all():
        raise InputError(f"class {spec!r}: forward returned a NaN or infinite score at its first batch")
