"""Other processes of this host, as ``/proc`` shows them: whether one still runs (its pid and start time, so a reused pid
is not taken for it), and the Snakemake process a stage runs under. Torch-free: the results lock reads it when jobs
start."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from pathlib import Path

# How far up a stage's ancestors the Snakemake that started it is looked for: Snakemake -> its shell -> the stage, and
# under train.processes the launcher between the shell and each training process.
ANCESTORS = 8


# prctl's option: the signal the kernel sends this process when the thread that created it ends (linux/prctl.h)
PR_SET_PDEATHSIG = 1


def end_with_parent(parent: int, sig: int = signal.SIGKILL) -> None:
    """Have the kernel send ``sig`` to this process when its parent ``parent`` (the pid it had before forking) ends
    (Linux; elsewhere nothing): called first in a forked child, so that a child whose parent was killed (``kill -9``
    skips every cleanup) does not run on alone. A parent that ended before this call: the child ends at once."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
    if os.getppid() != parent:  # the parent ended between the fork and the prctl
        os.kill(os.getpid(), sig)


def process_start(pid: int) -> str | None:
    """The start time of ``pid`` (``/proc/<pid>/stat`` field 22), which tells a pid reused by another process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def is_running(pid: object, started: object = None) -> bool:
    """Whether process ``pid`` runs, and is the one that started at ``started`` (when known)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: running
    return started is None or process_start(pid) in (None, started)


def parent_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def is_snakemake(pid: int) -> bool:
    """Whether ``pid`` is a Snakemake process: ``snakemake ...``, ``python .../snakemake ...``, ``python -m snakemake``."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:3]
    except OSError:
        return False
    return any(os.path.basename(arg.decode(errors="replace")).startswith("snakemake") for arg in argv)


def snakemake_ancestor() -> tuple[int, str | None] | None:
    """The nearest Snakemake process among this process's ancestors (its pid and start time), or None: run by hand."""
    pid = os.getpid()
    for _ in range(ANCESTORS):
        parent = parent_of(pid)
        if parent is None or parent <= 1:
            return None
        if is_snakemake(parent):
            return parent, process_start(parent)
        pid = parent
    return None
