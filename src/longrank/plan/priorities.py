"""The jobs' priorities. With one thread a job, a run is a list schedule of its jobs on --cores cores, and it ends
soonest when the long jobs start first and the short ones fill the cores at the end (docs/studies/speed.md, "The
default run's time").
Snakemake starts the ready job of highest priority, so the jobs are given levels by how long they take:

- the checks that can refuse the run once the data is read (``satisfiable``: seconds) before anything long, so that
  a refusal comes before any job it would have made a waste of;
- MIR's chain (spaCy's annotation, its graphs and what they read, then its training and rerank) is the longest of
  the default run, and MIR trains longest at full scale too (docs/gpu-bill.md): first, so that the other models' jobs
  fill the other cores beside it instead of MIR running alone at the end. A rule's priority does not pass to the jobs
  it waits for, so every job of the chain carries it (longrank.plan.mir_chain);
- the trainings and the jobs they wait for;
- the reranks and the papers' speed tables;
- the rest (benches, evaluations, history: seconds each) at 0, filling the cores at the end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from collections.abc import Callable

from longrank.plan.mir_chain import MirChain

CHECK_PRIORITY = 4
MIR_CHAIN_PRIORITY = 3
TRAINING_PRIORITY = 2
RERANK_PRIORITY = 1

# the wildcard each part of MIR's chain holds values of
CHAIN_WILDCARDS = {"models": "model", "stages": "first_stage", "indexes": "first_stage", "pseudo_sets": "pseudo_set"}


@dataclass(frozen=True)
class Priorities:
    """Priorities of the jobs whose level depends on their wildcards: in MIR's chain or not."""

    chain: MirChain
    mir_models: frozenset[str]

    def of_chain_part(self, part: str, wildcard_value: str, otherwise: int = TRAINING_PRIORITY) -> int:
        """MIR_CHAIN_PRIORITY for a job of MIR's chain (``part`` of the chain holds its wildcard's value), else
        ``otherwise``."""
        return MIR_CHAIN_PRIORITY if wildcard_value in getattr(self.chain, part) else otherwise

    def chain_priority(self, part: str, otherwise: int = TRAINING_PRIORITY) -> Callable[[Any], int]:
        """A rule's priority function of its wildcards (``model``, ``first_stage`` or ``pseudo_set`` by ``part``)."""
        wildcard = CHAIN_WILDCARDS[part]
        return lambda wc: self.of_chain_part(part, getattr(wc, wildcard), otherwise)

    def rerank(self, model: str) -> int:
        """Only MIR's own rerank is in its chain (a first stage's model is read through its artifacts)."""
        return MIR_CHAIN_PRIORITY if model in self.mir_models else RERANK_PRIORITY
