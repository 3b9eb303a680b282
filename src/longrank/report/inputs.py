"""What the report reads (the files its manifest names), and how its systems relate to the config's first stages.

The first stages come from the resolved config (``config.json``): ``first_stages`` is an ordered mapping
name -> spec whose first entry is the default, and every model entry names the ``first_stage`` it reranks.
A system row is a first stage (its name), a model, the interpolation ``{model}+{first stage of the model}``,
or a row the config does not describe (the lexical sanity row), which ranks the default first stage's candidates.

The helpers take any object with ``config`` and ``models`` (an ``Inputs``, or a stand-in in a test).
"""

from __future__ import annotations

from pathlib import Path

from functools import cached_property
from collections.abc import Mapping

from longrank.errors import InputError
from longrank.evaluate.lengths import read_doc_lengths
from longrank.evaluate.metrics import evaluable_queries, read_folds, test_queries
from longrank.io.json_yaml import read_json
from longrank.io.trec_files import read_qrels, read_run
from longrank.results.stage_outputs import BenchTable, Interpolation, Rate
from longrank.report.manifest import Manifest
from longrank.retrieval.sanity_floor import Floor
from longrank.config.model_entries import is_enabled
from longrank.config.schema import schema_default

PRIMARY = "nDCG@10"  # the report's primary measure


def first_stages(config: Mapping) -> dict[str, dict]:
    """Name -> spec of the configured first stages, in config order (the first is the default)."""
    stages = config.get("first_stages") or {}
    if isinstance(stages, list):  # the unresolved YAML form: a list of specs with a name each
        return {spec["name"]: spec for spec in stages}
    return dict(stages)


def default_first_stage(config: Mapping) -> str | None:
    return next(iter(first_stages(config)), None)


def stage_label(name: str) -> str:
    """How text names a first stage: its name in upper case (``hdct`` reads HDCT)."""
    return name.upper()


def model_stage(inp, model: str) -> str | None:
    """The first stage a configured model reranks (its effective one: config.json's ``resolved_models``)."""
    if model in inp.resolved:
        return inp.resolved[model]["effective"]["first_stage"]
    return default_first_stage(inp.config)


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
    the one it reranks, a model's floor (``query_term_matches@…``) the one its name says, any other row (the sanity
    row) the default."""
    if system in first_stages(inp.config):
        return system
    floor = Floor.parse(system)
    if floor is not None:
        return floor.first_stage
    model = base_model(inp, system)
    return model_stage(inp, model) if model in inp.models else default_first_stage(inp.config)


def is_reranker(inp, system: str) -> bool:
    """Neither a first stage nor an interpolated row."""
    return system not in first_stages(inp.config) and base_model(inp, system) == system


def interpolations(inp) -> list[tuple[str, str, Interpolation]]:
    """(model, interpolated row, its weights) of every interpolation the rule passed, in the order of the models' names."""
    found = [
        (base_model(inp, system), system, Interpolation.read(path))
        for system, path in inp.manifest.interpolations.items()
    ]
    return sorted(found, key=lambda row: row[0])


def rerank_depth(inp, system: str) -> int:
    """How many first-stage candidates ``system`` scored: a model's effective depth (config.json's
    ``resolved_models``), a floor's from its name, else (a first stage, the global floor) the config's."""
    floor = Floor.parse(system)
    if floor is not None:
        return floor.depth
    if system in inp.resolved:
        return inp.resolved[system]["effective"]["rerank_depth"]
    return inp.config["rerank_depth"]


def measure_missing(inp, measures) -> str:
    """Why a section of the primary measure did not run: evaluation.measures lacks it."""
    configured = (inp.config.get("evaluation") or {}).get("measures") or list(measures)
    return f"evaluation.measures has no {PRIMARY} (it has {', '.join(map(str, configured)) or 'none'})"


def no_model_reason(inp, what: str, hint: str = "") -> str:
    """Why no enabled model ``what`` (re-ranks candidates, trains, ...): none configured, or every entry is
    ``enabled: false``, or (``hint``) what an entry would need."""
    every = list((inp.config.get("models") or {}).keys())
    if not every:
        return f"no model that {what}: the config's models: is empty"
    if not inp.models:
        return f"no model that {what}: every entry of models: has enabled: false ({', '.join(every)})"
    return f"no enabled model {what}" + (f" ({hint})" if hint else "") + f"; enabled: {', '.join(inp.models)}"


class Inputs:
    """Everything the report reads, from the files its manifest names (read once, when first asked for)."""

    def __init__(self, manifest: Manifest):
        self.manifest = manifest
        self.config = read_json(manifest.config)
        # A model an earlier config had and this one disables stays out of every section.
        self.models = {m: spec for m, spec in (self.config.get("models") or {}).items() if is_enabled(spec)}
        # each entry with its model's and the training loop's defaults filled in, written by the config stage (the
        # report imports nothing from models/ or train/)
        self.resolved = self.config["resolved_models"]
        self.first_stages = first_stages(self.config)
        if not self.first_stages:  # config.json passed the schema, which asks for one at least
            raise InputError(f"{manifest.config}: first_stages is empty")
        self.default_first_stage: str = next(iter(self.first_stages))
        data = manifest.data
        self.qrels = read_qrels(data["qrels.txt"])
        self.folds = read_folds(data["folds.json"])
        self.lengths = read_doc_lengths(data["doc_lengths.tsv"])
        self.stats = read_json(data["stats.json"])
        self.test_qids = test_queries(self.folds)
        self.evaluated_qids = evaluable_queries(self.qrels, self.test_qids)[0]
        self._runs: dict[str, dict] = {}

    def run(self, system: str):
        """The run of ``system`` (a first stage's: its candidates), None for a system the manifest does not name."""
        floors = {Path(path).stem: path for path in self.manifest.read_floors.values()}
        path = self.manifest.runs.get(system) or self.manifest.candidates.get(system) or floors.get(system)
        if path is None:
            return None
        if path not in self._runs:
            self._runs[path] = read_run(path)
        return self._runs[path]

    def candidates(self, stage: str | None = None):
        """The candidates of ``stage``, by default the default first stage."""
        stage = stage or self.default_first_stage
        path = self.manifest.candidates.get(stage) if stage else None
        if path is None:
            return None
        if path not in self._runs:
            self._runs[path] = read_run(path)
        return self._runs[path]

    def stage_of(self, system: str) -> str | None:
        return stage_of(self, system)

    def base_model(self, system: str) -> str:
        return base_model(self, system)

    def is_reranker(self, system: str) -> bool:
        return is_reranker(self, system)

    def max_doc_len(self, system: str):
        """How much of a document ``system``'s model reads (config.json's capabilities), None for a first stage."""
        model = base_model(self, system)
        return self.resolved[model]["capabilities"]["document_budget"] if model in self.models else None

    def bench_enabled(self, bench: str) -> bool:
        """The run's ``<bench>.enabled`` (bench, mores_speed, mir_speed), its schema default where unset."""
        return (self.config.get(bench) or {}).get("enabled", schema_default(f"{bench}.enabled"))

    @cached_property
    def benches(self) -> list[BenchTable]:
        return [BenchTable.read(path) for path in self.manifest.benches]

    @property
    def docs_per_ms(self) -> dict[str, float]:
        return throughput(self.benches)

    @property
    def rates(self) -> dict[str, Rate]:
        """System -> the timed passes behind its docs/ms, from the bench that gives ``docs_per_ms`` its figure."""
        ordered = sorted(self.benches, key=lambda bench: bench.side_by_side)
        found: dict[str, Rate] = {}
        for b in ordered:
            for name in b.docs_per_ms:
                found.pop(name, None)  # a later bench's figure replaces an earlier one's, its passes too
                if name in b.rates:
                    found[name] = b.rates[name]
        return found

    def rate_cell(self, system: str, scale: float = 1.0, digits: int = 2) -> str:
        """docs/ms (``scale`` 1000: docs/s) of ``system`` with its range over the timed passes, or "1 run"; a bench
        JSON without its passes (written before they were kept) says so rather than look precise."""
        rates, figures = self.rates, self.docs_per_ms
        if system in rates:
            return rates[system].describe(scale, digits)
        if system in figures:
            return f"{scale * figures[system]:,.{digits}f} (spread not recorded)"
        return "–"


def throughput(benches: list[BenchTable]) -> dict[str, float]:
    """System -> documents re-ranked per millisecond, from the benches that measured it; a side-by-side
    measurement (mir_speed: MIR and BERT-MaxP alternating in one process) over a separate bench of one entry."""
    ordered = sorted(benches, key=lambda bench: bench.side_by_side)
    return {name: float(v) for b in ordered for name, v in b.docs_per_ms.items()}
