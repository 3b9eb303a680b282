"""Writes docs/paper-settings.md: each paper's stated hyper-parameters (docs/paper_settings.yaml) beside the values
the full-scale configs resolve to (config/trec-dl-2019.yaml, config/trec-dl-2020.yaml, each merged over the bases its
first line names, config/config.yaml and config/trec-dl.yaml, as Snakemake merges them, then validated as the workflow
validates them).

    python docs/paper_settings.py          # rewrite docs/paper-settings.md
    python docs/paper_settings.py --check  # exit 1 if a config disagrees with the table, a row is dead, or the .md
                                           # is out of date

A row is live when flipping its value (another value of its type) changes what a stage reads (``reads``): the
arguments the model's constructor takes, its training settings, the candidates, depth, graph set, collection, word2vec
and rerank settings its jobs read. A key no stage reads under the config (a model key its type does not take, a PRF
setting of a graph set without PRF queries, word2vec when no model reads its vectors) is dead: ``dead_rows`` names it.

tests/test_paper_settings.py runs the same checks."""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
TABLE = REPO / "docs" / "paper_settings.yaml"
PAGE = REPO / "docs" / "paper-settings.md"
MISSING = object()


def merged_config(name: str) -> dict:
    """config/<name> merged over the bases its header names (Snakemake's --configfile merge), validated."""
    from longrank.validation.validate import validate_config
    from longrank.config.files import configfiles, merged

    return validate_config(merged(configfiles(f"config/{name}")))


def stated_bases(name: str) -> tuple[str, ...]:
    from longrank.config.files import read_overlay

    return read_overlay(f"config/{name}").bases


def model_value(entry: dict, key: str):
    """A model entry's value of ``key`` (``train.<key>`` for training keys), the default its code falls back to where
    the entry leaves it out: what the model is built and trained with."""
    from longrank.models.registry import constructor_defaults, model_class
    from longrank.config.train_settings import TrainSettings

    if key == "train.loss":  # no loss configured: the one the model's paper trains it with
        return entry.get("train", {}).get("loss") or model_class(entry["type"]).default_loss
    if key.startswith("train."):
        key = key.removeprefix("train.")
        return entry.get("train", {}).get(key, TrainSettings.defaults().get(key, MISSING))
    return entry.get(key, constructor_defaults(entry["type"]).get(key, MISSING))


def config_value(config: dict, path: str):
    """A value of the whole config by dotted path; a MIR graph set's keys with the graphs stage's defaults."""
    from longrank.data.mir_graph_settings import GraphSetSettings

    graph_defaults = GraphSetSettings().to_json()
    node = config
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return graph_defaults.get(part, MISSING) if path.startswith("mir_graphs.") else MISSING
        node = node[part]
    return node


def shipped_values(row: dict, config: dict) -> dict[str, object]:
    """What one config ships for a row: model name -> value, or {"(config)": value} for a config-wide key."""
    if "models" not in row:
        return {"(config)": config_value(config, row["key"])}
    return {
        name: model_value(config["models"][name], row["key"]) if name in config["models"] else MISSING
        for name in row["models"]
    }


def disagreements(table: dict) -> list[str]:
    """Every (config, row, model) whose resolved value is not the row's shipped value (its ``shipped``, else ``value``)."""
    problems = []
    for name in table["configs"]:
        config = merged_config(name)
        for paper in table["papers"]:
            for row in paper["settings"]:
                expected = row.get("shipped", row["value"])
                for model, value in shipped_values(row, config).items():
                    if value is MISSING or value != expected or isinstance(value, bool) != isinstance(expected, bool):
                        shown = "not configured" if value is MISSING else repr(value)
                        problems.append(
                            f"{name}: {model} {row['key']} is {shown}; docs/paper_settings.yaml says {expected!r} "
                            f"({row['stated']}, {row['source']})"
                        )
    return problems


def _graph_set(config: dict, name: str | None):
    """What the graphs stage reads of a graph set: its settings with the stage's defaults, and with PRF queries
    the pseudo-query set's settings (without them, no PRF setting is read)."""
    from longrank.data.mir_graph_settings import GraphSetSettings

    if name is None:
        return None
    spec = dict((config.get("mir_graphs") or {}).get(name) or {})
    prf = spec.pop("prf_queries", None)
    read = {**GraphSetSettings().to_json(), **spec}
    if prf is None:
        read = {k: v for k, v in read.items() if not k.startswith("prf_")}
    else:
        pseudo = (config.get("pseudo_queries") or {}).get(prf)
        read["prf_queries"] = (pseudo, (config["first_stages"].get((pseudo or {}).get("first_stage") or "")))
    return read


def reads(config: dict, name: str) -> dict:
    """What model ``name``'s jobs read of ``config``: constructor arguments (keys its type takes), training
    settings (negative_pairs only with negatives_from: both), candidates and depth, graph set, word2vec (only with
    embeddings: word2vec), the collection and the rerank settings."""
    from longrank.models.registry import architecture_params, constructor_defaults
    from longrank.config.train_settings import TrainSettings

    entry = config["models"][name]
    takes = constructor_defaults(entry["type"])
    train = {**TrainSettings.defaults(), **(entry.get("train") or {})}
    if train.get("negatives_from") != "both":
        train.pop("negative_pairs")
    return {
        "model": {k: v for k, v in architecture_params(entry).items() if k in takes},
        "train": {k: v for k, v in train.items() if k in TrainSettings.keys()},  # noqa: SIM118 (a classmethod)
        "candidates": config["first_stages"].get(entry.get("first_stage")),
        "depth": entry.get("rerank_depth", config.get("rerank_depth")),
        "graphs": _graph_set(config, entry.get("graph_set")),
        "word2vec": config.get("word2vec") if entry.get("embeddings") == "word2vec" else None,
        "dataset": config.get("dataset"),
        "rerank": config.get("rerank"),
    }


def flipped(value):
    """Another value of ``value``'s type."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value * 2 + 1
    if isinstance(value, list):
        return value[:-1] if value else ["flipped"]
    return f"{value}-flipped"


def _set(node: dict, path: list[str], value) -> None:
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value


def dead_rows(table: dict) -> list[str]:
    """Every (config, row, model) whose value, flipped, changes nothing a stage reads: a row that cannot fail."""
    problems = []
    for name in table["configs"]:
        config = merged_config(name)
        models = [m for m, e in config["models"].items() if e.get("enabled", True)]
        before = {m: reads(config, m) for m in models}
        for paper in table["papers"]:
            for row in paper["settings"]:
                shipped = row.get("shipped", row["value"])
                for model in row.get("models") or [None]:
                    flip = copy.deepcopy(config)
                    if model is None:
                        _set(flip, row["key"].split("."), flipped(shipped))
                    elif row["key"].startswith("train."):
                        _set(flip["models"][model], ["train", row["key"].removeprefix("train.")], flipped(shipped))
                    else:
                        _set(flip["models"][model], [row["key"]], flipped(shipped))
                    after = {m: reads(flip, m) for m in ([model] if model else models)}
                    if all(after[m] == before[m] for m in after):
                        problems.append(
                            f"{name}: {model or '(config)'} {row['key']} is dead: {shipped!r} -> "
                            f"{flipped(shipped)!r} changes nothing a stage reads ({row['stated']})"
                        )
    return problems


def _cell(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def render(table: dict) -> str:
    """The Markdown page: one table per paper, the shipped values read from the first full-scale config (the test
    checks every config against the rows)."""
    config = merged_config(table["configs"][0])
    lines = [
        "# The papers' settings in the full-scale configs",
        "",
        "Generated by `python docs/paper_settings.py` from `docs/paper_settings.yaml` and the resolved "
        f"{' and '.join(f'`config/{c}`' for c in table['configs'])} (each merged over "
        f"{' and '.join(f'`{base}`' for base in stated_bases(table['configs'][0]))}); "
        "`tests/test_paper_settings.py` fails when a config disagrees with a row or this page is out of date. "
        "A model's key left out of its entry shows the default its code uses.",
        "",
        "What these settings cost on a GPU (seconds per training step, per 1,000 reranked candidates, peak memory and "
        "the hours of each model's recipe on one H100): [the GPU bill](gpu-bill.md).",
        "",
    ]
    for paper in table["papers"]:
        lines += [
            f"## {paper['paper']}",
            "",
            "| stated | config key | models | paper | shipped | source |",
            "|---|---|---|---|---|---|",
        ]
        for row in paper["settings"]:
            shipped = shipped_values(row, config)
            values = sorted({_cell(v) for v in shipped.values()})
            shown = values[0] if len(values) == 1 else "; ".join(f"{m}: {_cell(v)}" for m, v in shipped.items())
            if "why" in row:
                shown += f" ({row['why']})"
            models = ", ".join(row.get("models", [])) or "(whole config)"
            lines.append(
                f"| {row['stated']} | `{row['key']}` | {models} | {_cell(row['value'])} | {shown} | {row['source']} |"
            )
        lines.append("")
    for heading, text in (table.get("notes") or {}).items():
        lines += [f"## {heading}", "", *text.strip().splitlines(), ""]
    return "\n".join(lines)


def load_table() -> dict:
    return yaml.safe_load(TABLE.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="check only; write nothing")
    args = parser.parse_args(argv)
    table = load_table()
    problems = disagreements(table) + dead_rows(table)
    for line in problems:
        print(line, file=sys.stderr)
    page = render(table) + "\n"
    if args.check:
        stale = not PAGE.exists() or PAGE.read_text() != page
        if stale:
            print(f"{PAGE} is out of date: python docs/paper_settings.py", file=sys.stderr)
        return 1 if problems or stale else 0
    PAGE.write_text(page)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
