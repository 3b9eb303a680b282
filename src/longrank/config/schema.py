"""The config schema (``workflow/schemas/config.schema.yaml``): where it is, and the defaults it states.

The schema is the one home of every config key's default that it states: validation fills them into the config the
workflow runs (``longrank.validation.validate.fill_defaults``), and a stage, a bench or a command a user types by hand that needs
one reads it here (``schema_default("rerank.batch_size")``) rather than writing the value a second time
(tests/test_single_source.py scans src/ for a schema default written as a literal)."""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import yaml

# Where this checkout keeps the config schema (Snakemake's layout: workflow/schemas/) and the shipped collection
# descriptions, relative to the repository root. The one place the schema's location is named: the workflow
# (workflow/rules/common.smk), docgen, docs/ and the tests read it from here.
SCHEMA = "workflow/schemas/config.schema.yaml"
DATASETS = "config/datasets"
# Found from this module's place in the checkout (src/longrank/config/schema.py), as the editable install runs it.
REPO = Path(__file__).resolve().parents[3]
SCHEMA_PATH = REPO / SCHEMA
DATASETS_DIR = REPO / DATASETS


@cache
def _schema() -> dict:
    with open(SCHEMA_PATH, encoding="utf-8") as f:  # libyaml's parser where PyYAML has it (as io.load_yaml: the
        return yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # ground floor imports no io)


def load_schema() -> dict:
    return copy.deepcopy(_schema())


def schema_node(path: str) -> dict:
    """The schema of the key at ``path``: dotted keys, ``*`` for an entry of a mapping of user-named entries
    (``mir_graphs.*.window``) or an item of a list (``first_stages.*.top_k``)."""
    node = _schema()
    for part in path.split("."):
        if part == "*":
            node = node["items"] if "items" in node else node["additionalProperties"]
        else:
            node = node["properties"][part]
    return node


def schema_default(path: str) -> Any:
    """The default the schema states for the key at ``path`` (KeyError naming it when it states none)."""
    node = schema_node(path)
    if "default" not in node:
        raise KeyError(f"the config schema states no default for {path}")
    return copy.deepcopy(node["default"])


def schema_defaults(path: str) -> dict[str, Any]:
    """The defaults the schema states for the keys of the mapping at ``path`` (``annotations``, ``mir_graphs.*``)."""
    return {
        key: copy.deepcopy(node["default"])
        for key, node in schema_node(path).get("properties", {}).items()
        if "default" in node
    }


def every_default() -> dict[str, Any]:
    """Every default the schema states, by dotted path (``*``: an entry of a mapping of user-named entries or an item
    of a list; ``|<i>``: the i-th alternative of a ``oneOf`` / ``anyOf``)."""
    found: dict[str, Any] = {}

    def walk(node: Any, path: str) -> None:
        if not isinstance(node, dict):
            return
        if "default" in node:
            found[path] = copy.deepcopy(node["default"])
        for key, child in (node.get("properties") or {}).items():
            walk(child, f"{path}.{key}" if path else key)
        for key in ("additionalProperties", "items"):
            walk(node.get(key), f"{path}.*")
        for key in ("oneOf", "anyOf", "allOf"):
            for i, child in enumerate(node.get(key) or []):
                walk(child, f"{path}|{i}")

    walk(_schema(), "")
    return found
