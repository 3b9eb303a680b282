"""The plan of one parse: the validated config's models, systems, floors and target files under the results folder,
resolved once so that the rules pass these values and no stage works them out again."""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Mapping

from longrank.validation.validate import model_order
from longrank.floors import floor_systems, model_floors
from longrank.config.model_entries import Effective, effective_settings
from longrank.plan import models as entries
from longrank.plan.mir_chain import MirChain, mir_chain
from longrank.plan.priorities import Priorities
from longrank.plan.seeds import SEED_MARK, planned_seeds, seed_model, with_seed_models
from longrank.retrieval.sanity_floor import Floor

DATA_FILES = (
    "docs.jsonl",
    "queries.tsv",
    "qrels.txt",
    "folds.json",
    "doc_lengths.tsv",
    "word_doc_freq.tsv",
    "excluded.tsv",
    "stats.json",
)


@dataclass(frozen=True)
class Plan:
    """What the workflow runs for ``config`` (validated) with its outputs under ``results`` (results/<name>)."""

    # the validated config, its models with each further training seed's (longrank.plan.seeds) as the jobs read them
    config: Mapping
    results: str
    data: dict[str, str]  # the data stage's files by name
    folds: list[int]
    models: list[str]  # enabled models, in the report's order (longrank.config.model_order)
    effective: dict[str, Effective]  # each entry as its jobs read it (rerank depth, first stage, words read)
    first_stages: list[str]  # the default first
    # The untrained lexical rerankers, sanity rows every trained model must beat: system name -> Floor,
    # query_term_matches (whole documents, global depth) first, then each trained model's own, each once
    floors: dict[str, Floor]
    model_floors: dict[str, str]  # trained model -> its floor's system name
    mir_reference: str | None  # the entry MIR's Fig. 5 times
    mir_chain: MirChain
    seeds: dict[str, list[int]]  # each entry training more than one seed -> its seeds, the first its own

    @property
    def sanity(self) -> str:
        """query_term_matches: a system of the comparison, as the models are."""
        return next(iter(self.floors))

    @property
    def floor_pairs(self) -> list[tuple[str, str]]:
        """Each trained model against its own floor: one Holm family of their own (rule compare_floors), so that
        the floors change no p-value of the main table."""
        return [(m, floor) for m, floor in self.model_floors.items() if floor != self.sanity]

    @property
    def floor_pair_systems(self) -> list[str]:
        """The systems of the floor pairs, each once, in the pairs' order."""
        return list(dict.fromkeys(s for pair in self.floor_pairs for s in pair))

    def first_stage_of(self, model: str) -> str:
        return self.effective[model].first_stage

    def candidates_of(self, model: str) -> str:
        return f"{self.results}/candidates/{self.first_stage_of(model)}.run"

    def weights_of(self, model: str) -> str:
        return entries.weights_of(self.config, model)

    def pseudo_queries_of(self, model: str) -> str | None:
        return entries.pseudo_queries_of(self.config, model)

    def model_systems(self, model: str) -> list[str]:
        """A model's systems of the comparison: itself, and its interpolation with its first stage."""
        interpolated = [f"{model}+{self.first_stage_of(model)}"] if self.config["models"][model]["interpolate"] else []
        return [model] + interpolated

    @property
    def systems(self) -> list[str]:
        """Every system of the comparison: the first stages, the sanity floor, each model's systems."""
        return self.first_stages + [self.sanity] + [s for m in self.models for s in self.model_systems(m)]

    def run_file(self, system: str) -> str:
        if system in self.config["first_stages"]:
            return f"{self.results}/candidates/{system}.run"
        return f"{self.results}/runs/{self._seed_system_run(system)}.run"

    def _seed_system_run(self, system: str) -> str:
        """The run a system's name stands for: a first seed's system (``knrm@seed0+<first stage>``) is its entry's own run."""
        model, plus, rest = system.partition("+")
        entry, mark, seed = model.partition(SEED_MARK)
        if mark and entry in self.seeds and seed.isdigit() and int(seed) == self.seeds[entry][0]:
            return entry + plus + rest
        return system

    @property
    def seed_models(self) -> list[str]:
        """The models of every seed after an entry's first (the first is the entry itself)."""
        return [seed_model(m, seed) for m, seeds in self.seeds.items() for seed in seeds[1:]]

    def seed_systems(self, system: str) -> dict[int, str]:
        """A seeded model's system (``knrm``, ``knrm+<first stage>``) -> its seeds' systems by seed; {} for any other."""
        model, plus, rest = system.partition("+")
        return {seed: seed_model(model, seed) + plus + rest for seed in self.seeds.get(model, [])}

    def evaluated_runs(self, system: str) -> list[str]:
        """The runs a system's evaluation reads: every seed's, whose per-query measures it averages, for a seeded
        model's system; the system's own run otherwise."""
        seeded = self.seed_systems(system)
        return [self.run_file(s) for s in seeded.values()] if seeded else [self.run_file(system)]

    @property
    def report(self) -> str:
        return f"{self.results}/report/index.html"

    @property
    def word2vec(self) -> str:
        return f"{self.results}/data/word2vec.txt"

    @property
    def mir_models(self) -> list[str]:
        return entries.graph_set_readers(self.config, self.models)

    @property
    def trained(self) -> list[str]:
        """The models that train their own weights (checkpoint_of shares another's)."""
        return [m for m in self.models if self.weights_of(m) == m]

    @property
    def pretrained(self) -> list[str]:
        return [m for m in self.trained if self.pseudo_queries_of(m)]

    @property
    def priorities(self) -> Priorities:
        # a MIR entry's further seeds are in MIR's chain as the entry is (longrank.plan.mir_chain)
        return Priorities(
            self.mir_chain, frozenset(entries.graph_set_readers(self.config, self.models + self.seed_models))
        )

    def speed_benched(self, bench: str) -> list[str]:
        return entries.speed_benched(self.config, self.models, bench)

    @property
    def benched(self) -> list[str]:
        """Every model the generic bench times (none with bench.enabled: false); MIR's models are MIR's bench's."""
        if not self.config["bench"]["enabled"]:
            return []
        return [m for m in self.models if m not in self.mir_models]

    @property
    def mores_speed(self) -> list[str]:
        """MORES's Table 4 (the dot keeps it apart from bench/{model}.json): only when a MORES model is configured."""
        wanted = self.config["mores_speed"]["enabled"] and self.speed_benched("mores_speed")
        return [f"{self.results}/bench/mores.speed.json"] if wanted else []

    @property
    def mores_speed_encoder(self) -> str:
        return entries.mores_speed_encoder(self.config, self.models)

    @property
    def mir_speed(self) -> list[str]:
        """MIR's Fig. 5, when a MIR entry is benched."""
        return (
            [f"{self.results}/bench/mir.speed.json"]
            if self.mir_reference and self.config["mir_speed"]["enabled"]
            else []
        )

    @property
    def attention_scaling(self) -> list[str]:
        """NDRM's Fig. 2 brought up to date, when an NDRM model is configured (as mores_speed with MORES)."""
        wanted = self.config["attention_scaling"]["enabled"] and self.speed_benched("attention_scaling")
        return [f"{self.results}/bench/attention_scaling.json"] if wanted else []


def build_plan(config: Mapping, results: str) -> Plan:
    """The plan of a validated config; an entry sharing weights that no entry trains is refused (InputError)."""
    models = model_order(config["models"])
    entries.check_checkpoint_sources(config, models)
    trained = [m for m in models if entries.weights_of(config, m) == m]
    seeds = planned_seeds(config["models"], trained)
    entries_only = config  # the floors and the benches are the entries', not each seed's
    config = {**config, "models": with_seed_models(config["models"], seeds)}
    effective = effective_settings(config)
    seeded = models + [seed_model(m, seed) for m, listed in seeds.items() for seed in listed[1:]]
    return Plan(
        config=config,
        results=results,
        data={name: f"{results}/data/{name}" for name in DATA_FILES},
        folds=list(range(config["splits"]["k"] if config["splits"]["method"] == "kfold" else 1)),
        models=models,
        effective=effective,
        first_stages=list(config["first_stages"]),
        floors=floor_systems(entries_only),
        model_floors=model_floors(entries_only),
        mir_reference=entries.mir_reference(config, models),
        mir_chain=mir_chain(config, seeded, lambda m: effective[m].first_stage),
        seeds=seeds,
    )
