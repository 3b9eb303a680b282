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

from longrank.config.model_entries import is_enabled
from longrank.config.train_settings import TrainSettings, seeds_of

SEED_MARK = "@seed"


def seed_model(entry_name: str, seed: int) -> str:
    return f"{entry_name}{SEED_MARK}{seed}"


def job_entry(entry: Mapping, seed: int) -> dict:
    """What one seed's jobs are passed: the entry without its list of seeds, training with ``seed``. ``train.seed``
    is written only where it differs from the entry's, so that the first seed's jobs are passed the very entry they
    were passed before the entry had seeds (Snakemake reruns a job whose settings changed)."""
    job = copy.deepcopy(dict(entry))
    train = job.get("train") or {}
    train.pop("seeds", None)
    if seed != train.get("seed", TrainSettings.seed):
        train["seed"] = seed
    if "train" in job or train:
        job["train"] = train
    return job


def planned_seeds(models: Mapping, trained: list[str]) -> dict[str, list[int]]:
    """Each entry of ``trained`` (the enabled entries that train their own weights) with more than one seed, and each
    enabled entry that scores with one of their weights (``checkpoint_of``: MORES Reuse), which has its source's seeds,
    one model per seed scoring with that seed's weights."""
    seeds = {name: seeds_of(models[name]) for name in trained if len(seeds_of(models[name])) > 1}
    sharers = {
        name: seeds[entry["checkpoint_of"]]
        for name, entry in models.items()
        if entry.get("checkpoint_of") in seeds and is_enabled(entry)
    }
    return {**seeds, **sharers}


def with_seed_models(models: Mapping, seeds: Mapping[str, list[int]]) -> dict:
    """``models`` (the config's entries) with each seeded entry's seeds (``planned_seeds``): the entry itself training
    its first seed and one model per further seed (``seed_model``), each as its jobs read it (``job_entry``); a model
    sharing a seeded entry's weights shares those of its own seed."""
    expanded = {name: copy.deepcopy(dict(entry)) for name, entry in models.items()}
    for name, (first, *further) in seeds.items():
        entry, source = models[name], models[name].get("checkpoint_of")
        if source is None:
            expanded[name] = job_entry(entry, first)
            expanded.update({seed_model(name, seed): job_entry(entry, seed) for seed in further})
        else:  # its own seeds, if it has any (a like: of its source), are its source's (validation: check_seeds)
            expanded[name] = job_entry(entry, (entry.get("train") or {}).get("seed", TrainSettings.seed))
            expanded.update({seed_model(name, seed): {**expanded[name], "checkpoint_of": seed_model(source, seed)}
                             for seed in further})  # fmt: skip
    return expanded
