"""A ``first_stages`` entry as a typed value: its name, method, depth and the settings of its method, each a small
dataclass, read once (:func:`parse_first_stage`) with errors that name the entry's key. Light on purpose (no
retrieval library is imported): validating a config parses every entry."""

from __future__ import annotations

from dataclasses import dataclass, fields

from longrank.errors import InputError
from longrank.io.trec_files import SCORE_ORDERS
from longrank.config.model_types import DEFAULT_ENCODER
from longrank.retrieval.bm25 import METHOD as BM25_METHOD
from longrank.retrieval.pisa import PisaSettings
from longrank.config.schema import schema_default


@dataclass(frozen=True)
class Bm25Settings:
    """``method: bm25`` (bm25s, :mod:`longrank.retrieval.bm25`): a Snowball stemmer language and bm25s's stop words."""

    k1: float = 0.9
    b: float = 0.4
    stemmer: str | None = "english"
    stopwords: str | None = "en"

    @classmethod
    def from_spec(cls, spec: dict, where: str) -> Bm25Settings:
        defaults = cls()
        values = {key: spec.get(key, getattr(defaults, key)) for key in ("k1", "b", "stemmer", "stopwords")}
        _non_negative_numbers(values, ("k1", "b"), where)
        if values["b"] > 1:
            raise InputError(f"config key {where}.b: {values['b']!r} is over 1")
        for key in ("stemmer", "stopwords"):
            if values[key] is not None and not isinstance(values[key], str):
                raise InputError(f"config key {where}.{key}: {values[key]!r} is neither a name nor null")
        return cls(
            k1=float(values["k1"]), b=float(values["b"]), stemmer=values["stemmer"], stopwords=values["stopwords"]
        )


#: how HDCT adds up a document's passages' term frequencies
HDCT_COMBINE = ("max", "sum", "decay")


@dataclass(frozen=True)
class HDCTSettings:
    """``method: hdct`` (:mod:`longrank.train.hdct`): the encoder that predicts each passage's term weights, how it is
    trained (on the collection's titles or a pseudo_queries set), how passages' weights make a document's pseudo term
    frequencies, and BM25 over them. The one home of these defaults, CPU-sized (the TREC DL configs set the paper's);
    the schema lists the keys and states none."""

    encoder: str = DEFAULT_ENCODER
    passage_words: int = 100
    max_passages: int = 20
    m: int = 100  # the pseudo term frequency of a weight of 1
    combine: str = "decay"  # how a document's passages' frequencies add up: max, sum, decay (the i-th counts 1/i)
    targets: str = "titles"  # or the name of a pseudo_queries set
    title_field: str = "title"
    steps: int = 200
    batch_size: int = 16
    lr: float = 2e-5
    head_lr: float = 1e-3
    seed: int = 0
    k1: float = Bm25Settings.k1
    b: float = Bm25Settings.b

    @classmethod
    def from_spec(cls, spec: dict, where: str) -> HDCTSettings:
        settings = cls(**{f.name: spec[f.name] for f in fields(cls) if f.name in spec})
        if settings.combine not in HDCT_COMBINE:
            raise InputError(f"config key {where}.combine: {settings.combine!r} is not one of {list(HDCT_COMBINE)}")
        return settings


@dataclass(frozen=True)
class RunFileSettings:
    """``method: run_file``: the TREC run the user brings (relative to the working directory), and whether its
    score falls as its rank grows (``descending``, TREC's convention) or rises (``ascending``: a distance, a rank)."""

    path: str
    scores: str = "descending"


@dataclass(frozen=True)
class ModelSettings:
    """``method: model``: the configured model whose per-fold impact index ranks the collection."""

    model: str


#: the settings of a first stage's method, one type per method
FirstStageSettings = Bm25Settings | PisaSettings | RunFileSettings | ModelSettings | HDCTSettings

#: each method's settings type; None: the method has none (scoreddocs)
SETTINGS = {
    BM25_METHOD: Bm25Settings,
    "pisa": PisaSettings,
    "run_file": RunFileSettings,
    "model": ModelSettings,
    "scoreddocs": None,
    "hdct": HDCTSettings,
}


@dataclass(frozen=True)
class FirstStage:
    name: str
    method: str
    top_k: int
    settings: FirstStageSettings | None
    entry: dict  # the resolved entry as configured: what provenance records and the hdct stage reads


def parse_first_stage(spec: dict, where: str | None = None) -> FirstStage:
    """The typed first stage of one resolved entry. ``where`` names it in errors (``first_stages[2]`` while the
    config is validated; by default ``first_stages.<name>``)."""
    name = spec.get("name")
    where = where or f"first_stages.{name}"
    if not isinstance(name, str) or not name:
        raise InputError(f"config key {where}.name: a first stage needs a name (its row, candidates/<name>.run)")
    method = spec.get("method")
    if method not in SETTINGS:
        raise InputError(f"config key {where}.method: {method!r} is not one of {sorted(SETTINGS)}")
    top_k = spec.get("top_k", schema_default("first_stages.*.top_k"))
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise InputError(f"config key {where}.top_k: {top_k!r} is not a whole number >= 1")
    kind = SETTINGS[method]
    settings: FirstStageSettings | None
    if kind in (Bm25Settings, PisaSettings, HDCTSettings):
        settings = kind.from_spec(spec, where)
    elif kind is RunFileSettings:
        scores = spec.get("scores", "descending")
        if scores not in SCORE_ORDERS:
            raise InputError(f"config key {where}.scores: {scores!r} is not one of {list(SCORE_ORDERS)}")
        settings = RunFileSettings(path=_required_string(spec, "path", where), scores=scores)
    elif kind is ModelSettings:
        settings = ModelSettings(model=_required_string(spec, "model", where))
    else:
        settings = None
    return FirstStage(name=name, method=method, top_k=top_k, settings=settings, entry=dict(spec))


def _required_string(spec: dict, key: str, where: str) -> str:
    value = spec.get(key)
    if not isinstance(value, str) or not value:
        raise InputError(f"config key {where}.{key}: method {spec['method']} needs it (a non-empty string)")
    return value


def _non_negative_numbers(values: dict, keys, where: str) -> None:
    for key in keys:
        value = values[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise InputError(f"config key {where}.{key}: {value!r} is not a number >= 0")
