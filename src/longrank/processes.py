"""Other processes of this host, as ``/proc`` shows them: whether one still runs (its pid and start time, so a reused pid
is not taken for it), and the Snakemake process a stage runs under. Torch-free: the results lock reads it when jobs
start."""

from __future__ import annotations

import os
from pathlib import Path

# How far up a stage's ancestors the Snakemake that started it is looked for: Snakemake -> its shell -> the stage, and
# under train.processes the launcher between the shell and each training process.
ANCESTORS = 8


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
