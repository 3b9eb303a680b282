"""LongRank: a reproducible workflow comparing neural long-document re-rankers.

``longrank.load_ranker(DIR)`` loads a model ``longrank export`` wrote (:mod:`longrank.api`); it is imported on
first use, so ``import longrank`` stays free of torch."""

__version__ = "0.1.0"

__all__ = ["load_ranker", "__version__"]


def __getattr__(name: str):
    if name == "load_ranker":
        from longrank.api import load_ranker

        return load_ranker
    raise AttributeError(f"module 'longrank' has no attribute {name!r}")
