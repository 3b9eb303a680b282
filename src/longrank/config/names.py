"""Names that become paths, and the check that no stage's output is one of its inputs.

Every name a config gives that the workflow turns into a path (the dataset's: ``results/<name>/``; a model's:
``models/<name>/``, ``runs/<name>.run``; a first stage's: ``candidates/<name>.run``, its hdct or pisa index; a
pseudo-query or graph set's) is one safe pattern, :data:`SAFE_NAME`, defined here and nowhere else in Python (the
schema repeats it as its ``pattern``; a quick test checks every copy equals this one). It starts with a letter or a
digit (never ``.``, ``..``, ``-x``, which a shell or argparse reads as an option) and holds only letters, digits,
``_`` and ``-``: no separator, no dot, no whitespace or control character. ``dataset.name: ".."`` made
``results/..`` the working directory, and the data stage then wrote over (and Snakemake deleted) the user's own
collection files.

A safe name keeps every output under ``results/<name>/``; :func:`check_outputs_not_inputs` refuses the other way
in: a configured input file (a local collection's files, a run file) inside ``results/<name>/``, where a stage's
output would be its own input."""

from __future__ import annotations

import os
import re
from pathlib import Path

from longrank.errors import InputError

SAFE_NAME = "^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$"
_SAFE = re.compile(SAFE_NAME)
EXPECTED = (
    "a name that becomes a path must start with a letter or digit and hold only letters, digits, '_' and '-' "
    "(at most 100 characters; no '.', '/', whitespace or control characters)"
)


def check_name(value, key: str) -> str:
    """``value`` if it is a safe name, else an InputError naming ``key``. A value that is not a string is left to
    the schema, which names the type it expects."""
    # fullmatch, not match: '$' also matches before a final newline, so 'x\n' would pass ``re.match``
    if isinstance(value, str) and not _SAFE.fullmatch(value):
        raise InputError(f"config key {key}: {value!r} is not a safe name; {EXPECTED}")
    return value


def config_names(config: dict) -> list[tuple[str, object]]:
    """(config key, name) of every name in ``config`` that becomes a path, before or after the first stages are
    resolved into a mapping."""
    names: list[tuple[str, object]] = []
    dataset = config.get("dataset")
    if isinstance(dataset, dict) and "name" in dataset:
        names.append(("dataset.name", dataset["name"]))
    stages = config.get("first_stages")
    if isinstance(stages, list):
        names += [(f"first_stages.{i}.name", s.get("name")) for i, s in enumerate(stages) if isinstance(s, dict)]
    elif isinstance(stages, dict):
        names += [(f"first_stages.{name}", name) for name in stages]
    for section in ("models", "pseudo_queries", "mir_graphs"):
        if isinstance(config.get(section), dict):
            # an unsafe name is shown once, by its repr in the message, not inside the key (it may hold a newline)
            names += [
                (f"{section}.{name}" if _SAFE.fullmatch(str(name)) else section, name) for name in config[section]
            ]
    return names


def check_config_names(config: dict) -> None:
    """Every name in ``config`` that becomes a path is safe (:data:`SAFE_NAME`), or an InputError naming its key."""
    for key, name in config_names(config):
        check_name(name, key)


def check_outputs_not_inputs(config: dict, results: str | os.PathLike) -> None:
    """No configured input file lies inside ``results`` (``results/<dataset name>/``, every stage's outputs): the
    data stage would write its outputs over its own inputs, and Snakemake delete them before the job. Paths are
    compared resolved (symbolic links followed), so a link into ``results/`` is caught too."""
    root = Path(os.path.realpath(results))
    dataset = config.get("dataset", {})
    inputs = [
        (f"dataset.{key}", dataset[key])
        for key in ("docs", "queries", "qrels", "train_queries", "train_qrels", "dev_queries", "dev_qrels")
        if isinstance(dataset.get(key), str)
    ]
    stages = config.get("first_stages", {})
    stages = stages.values() if isinstance(stages, dict) else stages
    inputs += [(f"first_stages.{s['name']}.path", s["path"]) for s in stages if isinstance(s.get("path"), str)]
    for key, value in inputs:
        path = Path(os.path.realpath(value))
        if path == root or root in path.parents:
            raise InputError(
                f"config key {key}: {value} lies inside {results}/, where the workflow writes this collection's "
                "outputs (a stage would overwrite or delete its own input); keep your files outside results/"
            )
