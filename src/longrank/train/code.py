"""The code a training runs, as one digest (``longrank.results.code_digest``): the train stage's module and the model's,
with every package module they import. Part of the training fingerprint, so that a state left by other code is
never resumed, and the train rule's parameter, so that changed arithmetic retrains. Light on purpose (no torch):
the workflow computes it when it builds the DAG.

A user's own model (``class:``, longrank.config.user_models) is its file and the modules beside it that it imports
(``code_digest.user_code``), and the package modules those import: read, never imported."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from longrank.config.user_models import is_user, parse_class_spec, source_file
from longrank.results.code_digest import code_digest, module_name, user_code
from longrank.models.registry import model_module

# What `python -m longrank train` runs (longrank.cli.STAGES: longrank.train.train), by its file: the digest reads it and
# never imports it (the stage imports the fingerprint, which imports this module)
TRAINING_FILE = Path(__file__).with_name("train.py")


def model_code(entry: Mapping[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The code of a configured entry's model: the package modules it roots in, and a user model's own files (path
    relative to where its imports are found -> digest)."""
    if not is_user(entry):
        return [model_module(entry["type"])], {}
    spec = parse_class_spec("class", entry["class"])
    path = source_file(spec, f"class {spec.text!r}")
    if spec.is_file:
        base = path.parent  # the directory the loader puts on sys.path (longrank.models.user)
    else:  # the sys.path entry the module lies under: up one directory per dotted part (and the package's own)
        base = path.parents[spec.target.count(".") + (path.name == "__init__.py")]
    files, package = user_code(path, base)
    return sorted(package), files


def training_code_digest(entry: Mapping[str, Any]) -> str:
    roots, files = model_code(entry)
    return code_digest(module_name(TRAINING_FILE), *roots, files=files)
