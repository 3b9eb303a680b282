"""LongRank: a reproducible workflow comparing neural long-document re-rankers."""

__version__ = "0.1.0"
