"""The files the report reads, named by its rule (workflow/rules/report.smk) and nothing else.

The rule builds one ``Manifest`` from the config it runs with, declares ``manifest.files()`` as its inputs and
passes ``manifest.to_json()`` to ``longrank report --manifest``. The report never looks around the results
folder, so the outputs of a model an earlier config had and this one does not never reach it. Stdlib only:
the Snakefile imports it at parse time.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

DATA_FILES = ("stats.json", "qrels.txt", "folds.json", "doc_lengths.tsv", "docs.jsonl", "queries.tsv")
COMPARE_FILES = ("table", "pairs", "settings", "markdown", "latex")


@dataclass
class Manifest:
    config: str  # the resolved config.json
    data: dict[str, str]  # each of DATA_FILES -> its path
    compare: dict[str, str]  # each of COMPARE_FILES -> its path (noninferiority.csv beside table.csv with a reference)
    runs: dict[str, str]  # system -> its run file, in the compare stage's order
    evals: dict[str, str]  # system -> its per-query evaluation
    candidates: dict[str, str]  # first stage -> its candidates run, in config order
    candidate_stats: dict[str, str]  # first stage -> candidates/{stage}.stats.json
    interpolations: dict[str, str] = field(default_factory=dict)  # {model}+{first stage} -> its .interpolation.json
    details: dict[str, str] = field(default_factory=dict)  # model -> runs/{model}.details.jsonl
    # trained model -> the run of its own floor (runs/query_term_matches@….run: the count over the words it reads, at
    # its depth, named as its file; runs/query_term_matches.run where that is the global one, also in ``runs``)
    read_floors: dict[str, str] = field(default_factory=dict)
    # compare_floors' pairs.csv: each model against its own floor, a Holm family of its own (None: no model has one)
    floor_pairs: str | None = None
    benches: list[str] = field(default_factory=list)  # bench tables (outputs.BenchTable)
    attention_scaling: str | None = None  # bench/attention_scaling.json, where that stage runs
    # model -> its training summaries, one per fold (training_log.tsv is written beside each)
    training: dict[str, list[str]] = field(default_factory=dict)
    pretraining: dict[str, str] = field(default_factory=dict)  # model -> its pre-training's train_summary.json
    pseudo_queries: dict[str, str] = field(default_factory=dict)  # pseudo-query set -> its folder (stats.json inside)
    # model -> history/<model>/latest.json (rule history); the experiment log reads the entries kept beside it
    history: dict[str, str] = field(default_factory=dict)
    # a seeded model's system (train.seeds) -> each seed's per-query evaluation by seed, in the seeds' order
    seed_evals: dict[str, dict[str, str]] = field(default_factory=dict)

    def files(self) -> list[str]:
        """Every path in the manifest: the rule's inputs."""
        found: list[str] = []

        def walk(value) -> None:
            if isinstance(value, str):
                found.append(value)
            elif isinstance(value, dict):
                for v in value.values():
                    walk(v)
            elif isinstance(value, list):
                for v in value:
                    walk(v)

        walk(asdict(self))
        return list(dict.fromkeys(found))

    def to_json(self) -> str:
        return json.dumps(asdict(self))  # in order: systems as compared, first stages as configured

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        obj = json.loads(text)
        missing = [
            k for k in ("config", "data", "compare", "runs", "evals", "candidates", "candidate_stats") if k not in obj
        ]
        if missing:
            raise ValueError(f"report manifest lacks {missing}")
        absent = [k for k in (*DATA_FILES,) if k not in obj["data"]] + [
            k for k in COMPARE_FILES if k not in obj["compare"]
        ]
        if absent:
            raise ValueError(f"report manifest lacks the files {absent}")
        return cls(**obj)
