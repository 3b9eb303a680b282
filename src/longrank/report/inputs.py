"""What the report reads from ``results/{dataset}/``, and how its systems relate to the config's first stages.

The first stages come from the resolved config (``config.json``): ``first_stages`` is an ordered mapping
name -> spec whose first entry is the default, and every model entry names the ``first_stage`` it reranks.
A system row is a first stage (its name), a model, the interpolation ``{model}+{first stage of the model}``,
or a row the config does not describe (the lexical sanity row), which ranks the default first stage's candidates.

The helpers take any object with ``config`` and ``models`` (an ``Inputs``, or a stand-in in a test).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from longrank.config import document_budget
from longrank.evaluate.lengths import read_doc_lengths
from longrank.evaluate.metrics import evaluable_queries, read_folds, test_queries
from longrank.io import InputError, read_json, read_qrels, read_run

PRIMARY = "nDCG@10"  # the report's primary measure


def first_stages(config: Mapping) -> dict[str, dict]:
    """Name -> spec of the configured first stages, in config order (the first is the default).

    A ``config.json`` written before there were several first stages has one ``first_stage`` block: it is
    read as one first stage named by its method."""
    stages = config.get("first_stages")
    if isinstance(stages, list):  # the unresolved YAML form: a list of specs with a name each
        return {spec["name"]: spec for spec in stages}
    if stages:
        return dict(stages)
    old = config.get("first_stage")
    if isinstance(old, Mapping) and old.get("method"):
        return {str(old["method"]): dict(old)}
    return {}


def default_first_stage(config: Mapping) -> str | None:
    return next(iter(first_stages(config)), None)


def stage_label(name: str) -> str:
    """How text names a first stage: its name in upper case (``hdct`` reads HDCT)."""
    return name.upper()


def model_stage(inp, model: str) -> str | None:
    """The first stage a configured model reranks (the default when the entry names none)."""
    return (inp.models.get(model) or {}).get("first_stage") or default_first_stage(inp.config)


def interpolated(inp, model: str) -> str:
    """The row of ``model`` interpolated with the first stage it reranked."""
    return f"{model}+{model_stage(inp, model)}"


def base_model(inp, system: str) -> str:
    """The model behind an interpolated row; any other system is its own."""
    for model in inp.models:
        if system == interpolated(inp, model):
            return model
    return system


def stage_of(inp, system: str) -> str | None:
    """The first stage whose candidates ``system`` ranks: a first stage its own, a model (or its interpolated row)
    the one it reranks, any other row (the sanity row) the default."""
    if system in first_stages(inp.config):
        return system
    model = base_model(inp, system)
    return model_stage(inp, model) if model in inp.models else default_first_stage(inp.config)


def is_reranker(inp, system: str) -> bool:
    """Neither a first stage nor an interpolated row."""
    return system not in first_stages(inp.config) and base_model(inp, system) == system


def interpolations(inp) -> list[tuple[str, str, dict]]:
    """(model, interpolated row, content) of every runs/*.interpolation.json, in the order of the models' names.

    The interpolate stage writes ``runs/{model}+{first stage}.interpolation.json`` with the row's name in
    ``system``; a rerank stage of earlier versions wrote ``runs/{model}.interpolation.json`` without it."""
    runs = inp.root / "runs"
    out = []
    for path in sorted(runs.glob("*.interpolation.json")) if runs.exists() else []:
        info = read_json(path)
        name = path.name[: -len(".interpolation.json")]
        system = info.get("system") or interpolated(inp, name)
        out.append((base_model(inp, system) if info.get("system") else name, system, info))
    return sorted(out, key=lambda row: f"{row[0]}.interpolation.json")


def rerank_depth(inp, system: str) -> int:
    """How many first-stage candidates ``system`` scored: its own rerank_depth, else the global one (schema default 100)."""
    return int((inp.models.get(system) or {}).get("rerank_depth") or inp.config.get("rerank_depth") or 100)


class Inputs:
    """Lazy access to everything under results/{dataset}; missing optional files give None."""

    def __init__(self, results: Path, eval_dir: Path, compare_dir: Path):
        self.root, self.eval_dir, self.compare_dir = results, eval_dir, compare_dir
        self.config = read_json(results / "config.json") if (results / "config.json").exists() else {}
        self.models = self.config.get("models", {}) or {}
        self.first_stages = first_stages(self.config)
        self.default_first_stage = next(iter(self.first_stages), None)
        data = results / "data"
        self.qrels = read_qrels(data / "qrels.txt") if (data / "qrels.txt").exists() else None
        self.folds = read_folds(data / "folds.json") if (data / "folds.json").exists() else None
        self.lengths = read_doc_lengths(data / "doc_lengths.tsv") if (data / "doc_lengths.tsv").exists() else None
        self.stats = read_json(data / "stats.json") if (data / "stats.json").exists() else None
        self.test_qids = test_queries(self.folds) if self.folds else None
        self.evaluated_qids = (evaluable_queries(self.qrels, self.test_qids)[0]
                               if self.qrels is not None and self.test_qids is not None else None)
        self._runs: dict[str, dict | None] = {}
        self._benches: list[tuple[str, dict]] | None = None

    def run(self, system: str):
        if system not in self._runs:
            path = self.root / "runs" / f"{system}.run"
            self._runs[system] = read_run(path) if path.exists() else None
        return self._runs[system]

    def candidates(self, stage: str | None = None):
        """candidates/{stage}.run (runs/{stage}.run where there is none) of ``stage``, by default the default first stage."""
        stage = stage or self.default_first_stage
        if stage is None:
            return None
        key = f"candidates/{stage}"
        if key not in self._runs:
            path = self.root / "candidates" / f"{stage}.run"
            self._runs[key] = read_run(path) if path.exists() else self.run(stage)
        return self._runs[key]

    def stage_of(self, system: str) -> str | None:
        return stage_of(self, system)

    def base_model(self, system: str) -> str:
        return base_model(self, system)

    def is_reranker(self, system: str) -> bool:
        return is_reranker(self, system)

    def max_doc_len(self, system: str):
        return document_budget(self.models.get(base_model(self, system)) or {})

    @property
    def benches(self) -> list[tuple[str, dict]]:
        """(name, content) of every bench/*.json."""
        if self._benches is None:
            self._benches = []
            bench_dir = self.root / "bench"
            for path in sorted(bench_dir.glob("*.json")) if bench_dir.exists() else []:
                try:
                    self._benches.append((path.stem, read_json(path)))
                except ValueError as err:
                    raise InputError(f"{path}: not valid JSON ({err})") from None
        return self._benches

    @property
    def docs_per_ms(self) -> dict[str, float]:
        """System -> documents re-ranked per millisecond, from the benches that measured it; a side-by-side
        measurement (mir_speed: MIR and BERT-MaxP alternating in one process) over a separate bench of one entry."""
        ordered = sorted(self.benches, key=lambda bench: bool(bench[1].get("side_by_side")))
        return {name: float(v) for _, b in ordered for name, v in (b.get("docs_per_ms") or {}).items()}
