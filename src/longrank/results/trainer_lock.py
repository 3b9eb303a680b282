"""One trainer per training state: a trainer holds an exclusive ``flock`` on ``.train_state.lock`` beside its
``train_state/`` for as long as it runs (``holding_state``); the operating system releases it when the process ends,
however it ends (``kill -9`` too). The file holds the holder's pid and start time. A second trainer on the same state
is refused, naming the state and the holder. The file stays when the trainer ends (removing it would let a trainer
that opened it before the removal and one that creates it anew both lock "it"); ``clear_state`` never sees it, being
beside the state. The results lock (``results/lock.py``) asks ``live_trainers`` before it takes a stale lock over.
Torch-free: the workflow takes the results lock when its jobs start."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from longrank.errors import InputError
from longrank.processes import process_start

LOCK_NAME = ".train_state.lock"
# A probe of ``live_trainers`` holds the lock (shared) for microseconds: a trainer starting then tries again.
TAKE_ATTEMPTS, TAKE_PAUSE_S = 10, 0.05
# What flock raises on a file system that has none (Lustre mounted noflock, NFSv3 without lockd, some FUSE mounts)
NO_FLOCK = {errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP}

log = logging.getLogger(__name__)


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
            except OSError as err:
                if err.errno not in NO_FLOCK:
                    raise
                # a file system without flock (Lustre mounted noflock, NFSv3 without lockd): train unguarded
                log.warning(
                    "the training state %s cannot be locked on this file system (%s): one trainer per "
                    "state is not checked",
                    state_dir,
                    err.strerror,
                )
                break
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
    except OSError as err:
        if err.errno not in NO_FLOCK:
            raise
        return None  # no flock here: no trainer can be seen holding it (holding_state warned when it started)
    finally:
        os.close(fd)  # releases the probe's shared lock, if it got one
    return None


def live_trainers(results: Path) -> list[tuple[Path, dict]]:
    """The trainings under a results folder (``models/<model>/<fold>/``) that a running process trains."""
    found = ((lock, live_trainer(lock)) for lock in sorted(results.glob(f"models/*/*/{LOCK_NAME}")))
    return [(lock.parent / "train_state", who) for lock, who in found if who is not None]
