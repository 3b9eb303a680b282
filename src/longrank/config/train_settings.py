"""A model's training recipe (its config entry's ``train:`` block) as typed settings, built once where a stage receives
the entry (``TrainSettings.from_entry``). The defaults are this module's, and only this module's: the JSON schema
(``models.*.train``) lists the same keys and states no default of its own (``tests/test_train_settings.py`` holds the
two together). Imports no torch: the config stage fills the defaults in from here."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from longrank.errors import InputError

Precision = Literal["fp32", "bf16", "fp16"]
Positives = Literal["candidates", "judged"]
NegativesFrom = Literal["candidates", "collection", "both"]
Loss = Literal["pairwise_hinge", "ranknet", "listwise_ce", "pointwise_bce"]
Optimizer = Literal["adamw", "adam"]
Schedule = Literal["linear", "constant"]


# Keys of the train block that say how many trainings the plan makes, not how one trains: ``seeds``
# (longrank.plan.seeds gives each seed its own entry, whose ``seed`` is the recipe's).
PLAN_KEYS = frozenset({"seeds"})


@dataclass(frozen=True)
class Pretraining:
    """``train.pretrain``: the pseudo-query set to pre-train on, and the training keys it overrides for that run."""

    queries: str
    overrides: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict:
        """As the config writes it."""
        return {"queries": self.queries, **self.overrides}


@dataclass(frozen=True)
class TrainSettings:
    """Every key of a model's ``train:`` block, with its default (docs/configuration.md describes each)."""

    steps: int = 300
    batch_size: int = 8
    negatives: int = 1
    lr: float = 1e-3
    weight_decay: float = 0.0
    warmup_steps: int = 0
    loss: Loss | None = None  # None: the model's own (Ranker.default_loss)
    eval_every: int = 50
    patience: int = 3  # 0: no early stopping; every step runs and the last evaluation's weights are kept
    grad_clip: float = 1.0
    seed: int = 0
    eval_batch_size: int = 32
    embedding_lr: float | None = None
    scoring_lr: float | None = None
    positives: Positives = "candidates"
    negatives_from: NegativesFrom = "candidates"
    negative_pairs: bool = False
    num_workers: int = 0
    processes: int = 1
    # Micro-batches per optimiser step (gradient accumulation): each process's share of batch_size is split into
    # this many contiguous parts, each forward and backward alone, so a batch that does not fit one GPU's memory
    # still takes one step of the whole batch's gradient (train/accumulation.py).
    accumulation: int = 1
    pretrain: Pretraining | None = None
    # train.precision: the forward and loss under torch.autocast on a GPU (fp16 with a gradient scaler, as the MIR
    # paper trained); the weights, the optimiser and the dev evaluation stay fp32. The CPU trains fp32 whatever it says.
    precision: Precision = "fp32"
    # adamw: decoupled weight decay (the default); adam: torch's Adam, whose weight_decay is an L2 term added to the
    # gradient (the TKL and MIR papers' "Adam", MIR's "l2 weight decay").
    optimizer: Optimizer = "adamw"
    # linear: warm-up, then linear decay to 0 at ``steps`` (the default); constant: warm-up, then the rate as set.
    schedule: Schedule = "linear"

    @classmethod
    def from_entry(cls, name: str, entry: Mapping) -> TrainSettings:
        """The settings of model ``name``'s config entry; a key this recipe does not have, or a value of the wrong
        type, is an error naming it (``models.<name>.train.<key>``)."""
        return cls.from_mapping(f"models.{name}.train", entry.get("train") or {})

    @classmethod
    def from_mapping(cls, where: str, given: Mapping) -> TrainSettings:
        given = {key: value for key, value in given.items() if key not in PLAN_KEYS}
        unknown = set(given) - set(cls.keys())
        if unknown:
            raise InputError(f"{where}: unknown keys {sorted(unknown)}; expected {sorted(cls.keys())}")
        values = {}
        for key, value in given.items():
            if key == "pretrain":
                value = None if value is None else _pretraining(f"{where}.pretrain", value)
            else:
                _check_type(f"{where}.{key}", value, _FIELD_TYPES[key])
            values[key] = value
        return cls(**values)

    @classmethod
    def keys(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def defaults(cls) -> dict:
        """Every key's default, as a config writes it (the config stage fills resolved entries in with these)."""
        return cls().as_dict()

    def check_batch_split(self, where: str) -> None:
        """``batch_size`` splits into ``processes`` equal shares and each share into ``accumulation`` equal
        micro-batches of whole groups (every loss is a mean over groups: equal parts average to the batch's mean)."""
        if self.processes < 1:
            raise InputError(
                f"{where}.processes: expected a number of processes (an integer >= 1), got {self.processes!r}"
            )
        if self.batch_size % self.processes:
            raise InputError(
                f"{where}.batch_size: {self.batch_size} is the global batch, shared by train.processes: "
                f"{self.processes} processes; it must be divisible by {self.processes}"
            )
        share = self.batch_size // self.processes
        if self.accumulation < 1 or share % self.accumulation:
            raise InputError(
                f"{where}.accumulation: expected a positive integer that divides each process's share of the batch "
                f"(batch_size {self.batch_size} / processes {self.processes} = {share} groups), got {self.accumulation!r}"
            )

    def as_dict(self) -> dict:
        """Every key and its value, as a config writes it (train_summary.json keeps this)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        values["pretrain"] = self.pretrain.as_dict() if self.pretrain is not None else None
        return values


def seeds_of(entry: Mapping) -> list[int]:
    """The seeds an entry trains, the entry's own ``train.seed`` first where the list has it (its earlier training
    stays the entry's): ``train.seeds`` as a list, or a count of seeds from ``train.seed`` on (``seeds: 3`` with the
    default seed: 0, 1, 2), or ``train.seed`` alone."""
    train = entry.get("train") or {}
    own = train.get("seed", TrainSettings.seed)
    seeds = train.get("seeds")
    if seeds is None:
        return [own]
    if isinstance(seeds, int):
        return list(range(own, own + seeds))
    return sorted(seeds, key=lambda seed: seed != own)  # stable: the rest in the list's order


def _pretraining(where: str, value) -> Pretraining:
    if not isinstance(value, Mapping) or not isinstance(value.get("queries"), str):
        raise InputError(
            f"{where}: expected a mapping with `queries` (a set under pseudo_queries) "
            f"and training keys to override, got {value!r}"
        )
    overrides = {k: v for k, v in value.items() if k != "queries"}
    keys = set(TrainSettings.keys()) - {"pretrain"}
    unknown = set(overrides) - keys
    if unknown:
        raise InputError(
            f"{where}: unknown keys {sorted(unknown)}; expected `queries` and training keys {sorted(keys)}"
        )
    for key, given in overrides.items():
        _check_type(f"{where}.{key}", given, _FIELD_TYPES[key])
    return Pretraining(value["queries"], overrides)


_FIELD_TYPES = typing.get_type_hints(TrainSettings)
_TYPE_NAMES = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


def _check_type(where: str, value, annotation) -> None:
    """``value`` fits the field's annotation as JSON gives it: an integer is a number (``lr: 1``), a boolean is not an
    integer, None only where the field is optional, a Literal's values only."""
    union = isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union
    options = typing.get_args(annotation) if union else (annotation,)
    allowed: list[str] = []
    for option in options:
        if option is type(None):
            allowed.append("null")
            if value is None:
                return
        elif typing.get_origin(option) is Literal:
            allowed.append(" or ".join(repr(v) for v in typing.get_args(option)))
            if value in typing.get_args(option) and isinstance(value, str):
                return
        else:
            allowed.append(_TYPE_NAMES[option])
            if _fits(value, option):
                return
    raise InputError(f"{where}: expected {' or '.join(allowed)}, got {value!r} ({type(value).__name__})")


def _fits(value, expected: type) -> bool:
    if isinstance(value, bool):
        return expected is bool
    if expected is float:
        return isinstance(value, (int, float))
    return isinstance(value, expected)
