"""A ``first_stages`` entry as a typed value: its name, method, depth and the settings of its method, each a small
dataclass, read once (:func:`parse_first_stage`) with errors that name the entry's key. Light on purpose (no
retrieval library is imported): validating a config parses every entry."""

from __future__ import annotations

from dataclasses import dataclass

from longrank.io import SCORE_ORDERS, InputError
from longrank.retrieval.bm25 import METHOD as BM25_METHOD
from longrank.retrieval.pisa import PisaSettings
from longrank.schema import schema_default


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


#: each method's settings type; None: the method has none (scoreddocs) or reads its own keys (hdct's are
#: longrank.models.hdct.KEYS, read by its stage from the entry)
SETTINGS = {
    BM25_METHOD: Bm25Settings,
    "pisa": PisaSettings,
    "run_file": RunFileSettings,
    "model": ModelSettings,
    "scoreddocs": None,
    "hdct": None,
}


@dataclass(frozen=True)
class FirstStage:
    name: str
    method: str
    top_k: int
    settings: Bm25Settings | PisaSettings | RunFileSettings | ModelSettings | None
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
    if kind in (Bm25Settings, PisaSettings):
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
