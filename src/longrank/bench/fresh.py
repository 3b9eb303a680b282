"""One measurement in a fresh process, forked from a server that has only imported the measuring code.

Why fresh: a measurement's peak memory must not see what an earlier one cached, and its first forward's one-time
allocations count, as they do when a model reranks. Why forked from a server: a new interpreter per measurement paid
torch's and transformers' imports each time, about 7 s of the ~8 s a small measurement took on the 2-core machine; a
fork of a server that has them starts in milliseconds. The server has touched no GPU and holds no model, so every
child starts as a new process would, with the imports already done. It runs with glibc's mmap threshold at 64 KiB (as
``MALLOC_MMAP_THRESHOLD_=65536`` sets it at start-up), so tensors are mapped and unmapped, not kept in the heap, and a
child's peak memory is what its forwards took.

Where the server comes from:
- **A bench stage run from the command line** forks it from its own process (:func:`start_here`, which ``cli.main``
  calls for a stage module with ``fresh_preload``), after the imports and before the stage computes anything.
  Starting ``multiprocessing``'s forkserver instead cost each bench job ~9 s on the 2-core machine: a second
  interpreter importing torch and transformers again.
- **Any other caller** (a test session calling a stage's ``run``) gets ``multiprocessing``'s forkserver: a clean
  interpreter started once with the modules preloaded. Such a caller may have computed already, and a fork of a
  process that has run an OpenMP parallel region (torch's CPU ops) hangs in its child's first one."""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import importlib
import multiprocessing
import os
import traceback
from dataclasses import dataclass
from multiprocessing import forkserver
from multiprocessing.connection import Connection

# Imported by the server before it forks: the encoders' modules are what a new interpreter spent most of its time on
# (transformers imports them lazily, on the first from_pretrained). The word models need none of them, and a stage
# that measures only word models says so (``start_here``'s ``preload``): they cost ~5 s of the 2-core machine.
TORCH = ("torch",)
ENCODERS = ("transformers.models.auto.modeling_auto", "transformers.models.bert.modeling_bert")
PRELOAD = (*TORCH, *ENCODERS)


@dataclass(frozen=True)
class Outcome:
    """What a child returned (``result``), or why it returned nothing: its traceback (``error``) or its exit code
    (``exitcode``, negative for a signal, as ``-signal.SIGKILL`` from the kernel's OOM killer)."""

    result: dict | None
    error: str = ""
    exitcode: int = 0


MMAP_THRESHOLD = 65536
M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter, <malloc.h>

_started: list[str] = []
# module -> the connection to the server forked from this process, and its pid (start_here)
_here: dict[str, tuple[Connection, int]] = {}


def start_here(module: str, preload: tuple[str, ...] = PRELOAD) -> None:
    """Fork the server that measures with ``module`` from this process, now, after importing ``preload`` (what its
    measurements need: a stage module's ``fresh_preload(args)``). Call it only before this process has computed
    anything (see the module's docstring): ``cli.main`` does, between a bench stage's imports and its ``run``. The
    server ends when this process closes its end of the connection (at exit at the latest)."""
    if module in _here:
        return
    # Imported here, before the fork, not in the server: the stage's own model load then finds them too, where the
    # server and the stage each importing them cost a bench job ~3 s more of the 2-core machine.
    for name in (*preload, module):
        importlib.import_module(name)
    ours, its = multiprocessing.Pipe()
    pid = os.fork()
    if pid == 0:  # the server: never returns
        ours.close()
        _serve(module, its)
    its.close()
    _here[module] = (ours, pid)
    atexit.register(_stop, module)


def _stop(module: str) -> None:
    connection, pid = _here.pop(module)
    connection.close()
    os.waitpid(pid, 0)


def glibc() -> ctypes.CDLL | None:
    """The C library where it is glibc (it has ``mallopt`` and ``malloc_trim``); None elsewhere (musl, macOS)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") else None


def _serve(module: str, connection: Connection) -> None:
    try:
        os.environ["MALLOC_MMAP_THRESHOLD_"] = str(MMAP_THRESHOLD)  # the environment a new interpreter had
        libc = glibc()
        if libc:  # the variable above took effect only at a process's start
            libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        while True:
            try:
                job = connection.recv()
            except EOFError:  # the stage is done
                break
            connection.send(_fork_child(module, job))
    finally:
        os._exit(0)


def _fork_child(module: str, job: dict) -> Outcome:
    receive, send = multiprocessing.Pipe(duplex=False)
    pid = os.fork()
    if pid == 0:
        try:
            receive.close()
            _child(module, job, send)
        finally:
            os._exit(0)
    send.close()
    outcome = _outcome_from(receive)
    _, status = os.waitpid(pid, 0)
    return outcome or _ended(os.waitstatus_to_exitcode(status))


def _outcome_from(receive: Connection) -> Outcome | None:
    """What the child sent; None where it died before it sent anything (a signal, os._exit)."""
    try:
        return receive.recv()
    except EOFError:
        return None
    finally:
        receive.close()


def _ended(exitcode: int) -> Outcome:
    return Outcome(None, error=f"the measuring process ended with exit code {exitcode}", exitcode=exitcode)


def _context(module: str) -> multiprocessing.context.ForkServerContext:
    """The fork server, started on first use with ``module`` preloaded and glibc's mmap threshold in its
    environment, so that every child allocates as a new interpreter started with it would. multiprocessing keeps
    one server per process: a bench job measures with one module, and a second module (in a test session) is
    imported by each child instead."""
    context = multiprocessing.get_context("forkserver")
    if not _started:
        context.set_forkserver_preload([*PRELOAD, module])
        previous = os.environ.get("MALLOC_MMAP_THRESHOLD_")
        os.environ["MALLOC_MMAP_THRESHOLD_"] = str(MMAP_THRESHOLD)
        try:
            forkserver.ensure_running()
        finally:
            if previous is None:
                del os.environ["MALLOC_MMAP_THRESHOLD_"]
            else:
                os.environ["MALLOC_MMAP_THRESHOLD_"] = previous
        _started.append(module)
    return context


def _child(module: str, job: dict, conn) -> None:
    try:
        conn.send(Outcome(importlib.import_module(module).measure(job)))
    except BaseException:  # noqa: BLE001 - the parent raises it with the measurement's name
        conn.send(Outcome(None, error=traceback.format_exc()))
    finally:
        conn.close()


def measure_in_fresh_process(module: str, job: dict) -> Outcome:
    """``module.measure(job)`` in a new child of ``module``'s server (the one forked here, else the forkserver); its
    result, traceback or exit code."""
    if module in _here:
        connection = _here[module][0]
        try:
            connection.send(job)
            return connection.recv()
        except (EOFError, BrokenPipeError):
            return Outcome(None, error="the measuring server ended before it answered", exitcode=-1)
    context = _context(module)
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(module, job, send), daemon=True)
    child.start()
    send.close()
    outcome = _outcome_from(receive)
    child.join()
    assert child.exitcode is not None, "a joined child has ended"
    return outcome or _ended(child.exitcode)
