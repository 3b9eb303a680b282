"""One trainer per training state, and no trainer outliving the Snakemake that started it.

A trainer holds an exclusive ``flock`` on ``.train_state.lock`` beside its ``train_state/`` for as long as it runs
(``holding_state``); the operating system releases it when the process ends, however it ends (``kill -9`` too). The
file holds the holder's pid and start time. A second trainer on the same state is refused, naming the state and the
holder. The file stays when the trainer ends (removing it would let a trainer that opened it before the removal and
one that creates it anew both lock "it"); ``clear_state`` never sees it, being beside the state.

A training started by Snakemake (``starter``: the nearest Snakemake process among its ancestors) stops when that
process has ended: ``kill -9`` of Snakemake leaves its jobs running (their parent becomes 1), and a rerun would start
a second trainer on the state. The kernel sends SIGTERM when the direct parent ends (``PR_SET_PDEATHSIG``, Linux), and
the loop checks between steps that the Snakemake process still runs, since Snakemake runs the stage through a shell
that outlives it. Stopping keeps the last checkpoint set (sets are written whole), which a rerun resumes. A training
run by hand has no starter and runs on as any command does (under ``nohup``, too). Torch-free (the results lock reads
``live_trainers`` when the workflow's jobs start)."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from longrank.errors import InputError
from longrank.processes import is_running, process_start, snakemake_ancestor

log = logging.getLogger(__name__)

LOCK_NAME = ".train_state.lock"
# A probe of ``live_trainers`` holds the lock (shared) for microseconds: a trainer starting then tries again.
TAKE_ATTEMPTS, TAKE_PAUSE_S = 10, 0.05
PR_SET_PDEATHSIG = 1


def state_lock(state_dir: Path) -> Path:
    return state_dir.parent / LOCK_NAME


@contextlib.contextmanager
def holding_state(state_dir: Path) -> Iterator[None]:
    """Hold ``state_dir``'s lock while the block runs, or raise an InputError naming the process that holds it."""
    lock = state_lock(state_dir)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        for attempt in range(TAKE_ATTEMPTS):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt == TAKE_ATTEMPTS - 1:
                    raise InputError(held_message(state_dir, holder(lock))) from None
                time.sleep(TAKE_PAUSE_S)
        me = {
            "pid": os.getpid(),
            "pid_started": process_start(os.getpid()),
            "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me).encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)  # before the lock goes: no later reader takes an ended trainer for the holder
    finally:
        os.close(fd)  # releases the lock


def holder(lock: Path) -> dict:
    """What the lock file says of its holder (empty when unreadable: a holder between taking and writing it)."""
    try:
        value = json.loads(lock.read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def held_message(state_dir: Path, who: dict) -> str:
    return (
        f"the training state {state_dir} is in use by another trainer (process {who.get('pid', '?')} on "
        f"{who.get('host', '?')}, since {who.get('started', '?')}): two trainers on one state would overwrite each "
        f"other's checkpoints; wait for it to end, or stop it (kill {who.get('pid', '<pid>')}: it keeps its last "
        "checkpoint, which the next training resumes)"
    )


def live_trainer(lock: Path) -> dict | None:
    """The holder of ``lock`` when a running process holds it (tried without waiting), else None."""
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return holder(lock)
    finally:
        os.close(fd)  # releases the probe's shared lock, if it got one
    return None


def live_trainers(results: Path) -> list[tuple[Path, dict]]:
    """The trainings under a results folder (``models/<model>/<fold>/``) that a running process trains."""
    found = ((lock, live_trainer(lock)) for lock in sorted(results.glob(f"models/*/*/{LOCK_NAME}")))
    return [(lock.parent / "train_state", who) for lock, who in found if who is not None]


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
    if sys.platform.startswith("linux") and os.getppid() != found[0]:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    return Starter(*found)


class StarterEnded(InputError):
    """The Snakemake process that started the training has ended: the training stops, its last checkpoint kept (one
    line on the console, as an input error: nothing failed that a traceback would explain)."""
