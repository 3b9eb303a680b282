"""No trainer outliving the Snakemake that started it. ``kill -9`` of Snakemake leaves its jobs running (their
parent becomes 1), and a rerun would start a second trainer on the state (which ``results/trainer_lock.py`` refuses).
A training started by Snakemake (``Starter``: the nearest Snakemake process among its ancestors) stops when that
process has ended: the kernel sends SIGTERM when the direct parent ends (``PR_SET_PDEATHSIG``, Linux), and the loop
checks between steps that the Snakemake process still runs, since Snakemake runs the stage through a shell that
outlives it. Stopping keeps the last checkpoint set (sets are written whole), which a rerun resumes. A training run
by hand has no starter and runs on as any command does (under ``nohup``, too)."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass

from longrank.errors import InputError
from longrank.processes import end_with_parent, is_running, snakemake_ancestor


@dataclass(frozen=True)
class Starter:
    """The Snakemake process that started this training: its pid and start time (a reused pid is not it)."""

    pid: int
    started: str | None

    def ended(self) -> bool:
        return not is_running(self.pid, self.started)


def stop_with_starter() -> Starter | None:
    """At the stage's start: the Snakemake process that started it (None when run by hand), and on Linux SIGTERM from
    the kernel when this process's parent ends: the shell Snakemake ran it through, or the launcher of the training
    processes. Not when the parent is Snakemake itself: the kernel signals when the parent's thread that started the
    child ends, and Snakemake starts jobs from a pool of threads."""
    found = snakemake_ancestor()
    if found is None:
        return None
    if os.getppid() != found[0]:
        end_with_parent(os.getppid(), signal.SIGTERM)
    return Starter(*found)


class StarterEnded(InputError):
    """The Snakemake process that started the training has ended: the training stops, its last checkpoint kept (one
    line on the console, as an input error: nothing failed that a traceback would explain)."""
