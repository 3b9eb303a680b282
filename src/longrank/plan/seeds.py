"""Training seeds (an entry's ``train.seeds``): one model per seed, each its own training, reranking, interpolation
and evaluation jobs, so that adding a seed trains that seed alone.

An entry ``knrm`` with seeds ``[0, 1, 2]`` is planned as three models. The first seed keeps the entry's name and its
files (``models/knrm/``, ``runs/knrm.run``): an entry that had trained seed 0 alone keeps its training when seeds are
added. Each further seed is a model named ``knrm@seed1``, ``knrm@seed2``: ``@`` is not in a user's names
(``longrank.config.names.SAFE_NAME``), so no entry of the config can take a seed's name. Every seed's entry is the
entry with ``train.seed`` set to that seed and no ``seeds`` key: the jobs of one seed read nothing another seed
changes.

The comparison's system ``knrm`` is evaluated as each query's mean over the seeds' runs (rule evaluate reads them all);
the per-seed systems ``knrm@seed0``, ``knrm@seed1`` ... (``knrm@seed0+<first stage>`` for the interpolation) are evaluated one
by one for the report's seed section.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

SEED_MARK = "@seed"


def seeds_of(entry: Mapping) -> list[int]:
    """The seeds an entry trains: ``train.seeds`` as a list, or a count of seeds from ``train.seed`` on (so that
    ``seeds: 3`` keeps the seed the entry trained before first), or ``train.seed`` alone."""
    train = entry.get("train") or {}
    first = train.get("seed", 0)
    seeds = train.get("seeds")
    if seeds is None:
        return [first]
    if isinstance(seeds, int):
        return list(range(first, first + seeds))
    return list(seeds)


def seed_model(entry_name: str, seed: int) -> str:
    return f"{entry_name}{SEED_MARK}{seed}"


def is_seed_model(name: str) -> bool:
    return SEED_MARK in name


def job_entry(entry: Mapping, seed: int) -> dict:
    """What one seed's jobs are passed: the entry without its list of seeds, training with ``seed``. ``train.seed``
    is written only where it differs from the entry's, so that the first seed's jobs are passed the very entry they
    were passed before the entry had seeds (Snakemake reruns a job whose settings changed)."""
    job = copy.deepcopy(dict(entry))
    train = job.get("train") or {}
    train.pop("seeds", None)
    if seed != train.get("seed", 0):
        train["seed"] = seed
    if "train" in job or train:
        job["train"] = train
    return job


def with_seed_models(models: Mapping, trained: list[str]) -> dict:
    """``models`` (the config's entries) with the seeds of each entry in ``trained``: the entry itself training its
    first seed and one model per further seed (``seed_model``), each as its jobs read it (``job_entry``)."""
    expanded = {}
    for name, entry in models.items():
        if name not in trained:
            expanded[name] = copy.deepcopy(dict(entry))
            continue
        first, *further = seeds_of(entry)
        expanded[name] = job_entry(entry, first)
        expanded.update({seed_model(name, seed): job_entry(entry, seed) for seed in further})
    return expanded
