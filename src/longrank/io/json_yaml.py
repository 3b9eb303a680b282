"""JSON and YAML: ``*.json`` files (UTF-8, written atomically), the inline JSON objects of a command line, and YAML
read safely."""

from __future__ import annotations

import json
import os

from longrank.errors import InputError
from longrank.io.atomic import write_text
from longrank.io.text_files import check_regular_file


def load_yaml(stream):
    """``yaml.safe_load`` through libyaml's C parser where PyYAML has it, else the pure-Python parser: the same
    documents (one constructor, SafeLoader's), 8x faster on the config schema, which every config validation,
    dry run and test of a config reads."""
    import yaml

    return yaml.load(stream, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def read_yaml(path: str | os.PathLike):
    """The YAML file's value (read safely); a file that is not YAML is refused naming the file, the line and the
    column where the parser stopped (its ``problem_mark``), and what it found there."""
    import yaml

    path = check_regular_file(path)
    try:
        return load_yaml(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise UnreadableFileError(f"{path}: not UTF-8 text (byte {err.start}); expected YAML") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise UnreadableFileError(f"{where}: not valid YAML ({problem})") from None


def write_json(path: str | os.PathLike, obj) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


def _json_default(obj):
    if hasattr(obj, "item"):  # numpy / torch scalars
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"cannot serialise {type(obj).__name__} to JSON")


def json_object(text: str, what: str) -> dict:
    """An inline JSON object given on a command line (a stage's settings), or an InputError naming ``what``."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"{what}: not valid JSON ({err})") from None
    if not isinstance(value, dict):
        raise InputError(f"{what}: expected a JSON object of settings, got {value!r}")
    return value


class UnreadableFileError(InputError, ValueError):
    """A JSON file that is not JSON (or not UTF-8): the message names the file and the line. A ValueError too, so
    that a reader that treats an unreadable record as absent (a cache, a lock, a manifest) still does."""


def read_json(path: str | os.PathLike):
    """The file's JSON value; a file that is not UTF-8 JSON is refused naming the file and the line."""
    path = check_regular_file(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise UnreadableFileError(
            f"{path}: not UTF-8 text (byte {err.object[err.start]:#04x} at byte {err.start}); expected JSON"
        ) from None
    except json.JSONDecodeError as err:
        raise UnreadableFileError(f"{path}:{err.lineno}: not valid JSON ({err.msg}, column {err.colno})") from None
