"""A researcher's own ranker, named in the config by its class (``class: path/to/file.py:Ranker`` or
``class: package.module:Ranker``) instead of a paper model's ``type:`` (docs/your-model.md).

Torch-free on purpose, as the rest of ``longrank.config``: the config checks and the workflow's parse read the entry
here and never import the user's class (it would import torch). What the workflow must know without the class, the
entry declares: the text it reads (``reads``) and its document budget (``max_doc_len``). The class is imported by the
jobs that build the model (``longrank.models.user``), which check it against the entry.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from longrank.errors import InputError

#: the internal type of every entry that names a class: the rest of the code asks one question (``kind_of``)
USER = "user"
#: what a user model reads of a document: words (the word models' tokens) or WordPiece tokens (a pretrained encoder's)
READS = ("words", "wordpieces")
#: keys of a user entry that are the workflow's, not the class's (beside longrank.config.model_types.WORKFLOW_KEYS)
USER_KEYS = frozenset({"class", "reads"})
# The two forms of ``class:``: a dotted module or a path ending .py, then one Python name
_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_NAME = re.compile(r"^[A-Za-z_]\w*$")


@dataclass(frozen=True)
class ClassSpec:
    """A parsed ``class:`` value: a file (relative to the working directory) or a module, and the class's name."""

    text: str
    target: str
    class_name: str

    @property
    def is_file(self) -> bool:
        return self.target.endswith(".py")


def is_user(entry: Mapping[str, Any]) -> bool:
    return "class" in entry


def kind_of(entry: Mapping[str, Any]) -> str:
    """The entry's model type: its ``type:``, or ``user`` for an entry that names a class."""
    return USER if is_user(entry) else entry["type"]


def parse_class_spec(where: str, text: Any) -> ClassSpec:
    """``file.py:Class`` or ``package.module:Class``, else an error naming ``where`` (the config key)."""
    target, _, name = str(text).rpartition(":")
    form = target.endswith(".py") or _MODULE.match(target)
    if not isinstance(text, str) or not target or not form or not _NAME.match(name):
        raise InputError(
            f"{where}: {text!r} is not a class; expected 'path/to/file.py:ClassName' (relative to the working "
            "directory) or 'package.module:ClassName' (importable in this environment)"
        )
    return ClassSpec(text, target, name)


def source_file(spec: ClassSpec, where: str = "class") -> Path:
    """The file that defines the class, found without importing it: the path for a file spec, else the module's file
    on ``sys.path`` (a package's ``__init__.py``)."""
    if spec.is_file:
        path = Path(spec.target)
        if not path.is_file():
            raise InputError(
                f"{where}: {spec.target} is no file (paths are relative to the working directory, {Path.cwd()})"
            )
        return path.resolve()
    found = module_file(spec.target)
    if found is None:
        raise InputError(f"{where}: module {spec.target!r} is not on this environment's path (sys.path)")
    return found


def module_file(name: str, roots: list[str] | None = None) -> Path | None:
    """The source file of module ``name`` under one of ``roots`` (default ``sys.path``), or None; reads the
    directories only (finding it through importlib would run its parent packages' code)."""
    parts = name.split(".")
    for root in roots if roots is not None else sys.path:
        base = Path(root or ".").joinpath(*parts)
        for path in (base.with_suffix(".py"), base / "__init__.py"):
            if path.is_file():
                return path.resolve()
    return None


def check_user_entry(name: str, entry: Mapping[str, Any]) -> None:
    """The keys of entry ``name`` that the workflow reads without its class: ``class`` (its form, its file),
    ``reads`` and ``max_doc_len``. The class's own keys are checked when a job loads it (its signatures)."""
    where = f"config key models.{name}"
    if "type" in entry:
        raise InputError(
            f"{where}: both type ({entry['type']!r}) and class ({entry['class']!r}); an entry is a paper model "
            "(type:) or your own class (class:), not both"
        )
    source_file(parse_class_spec(f"{where}.class", entry["class"]), f"{where}.class")
    if entry.get("reads") not in READS:
        got = f"got {entry['reads']!r}" if "reads" in entry else "it is missing"
        raise InputError(f"{where}.reads: a class entry declares the text it reads, one of {list(READS)}; {got}")
    if "max_doc_len" not in entry:
        raise InputError(
            f"{where}.max_doc_len: a class entry declares its document budget (the {entry['reads']} it reads of a "
            "document); it is missing"
        )


def check_not_type_and_class(name: str, entry: Mapping[str, Any]) -> None:
    """An entry names a paper model (``type:``) or a class (``class:``)."""
    if "type" not in entry and "class" not in entry:
        raise InputError(
            f"config key models.{name}: names no model; give type: (a paper model) or class: "
            "(your own, 'path/to/file.py:ClassName')"
        )
    if is_user(entry):
        check_user_entry(name, entry)
