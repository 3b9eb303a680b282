"""One measurement in a fresh process, forked from a server that has only imported the measuring code.

Why fresh: a measurement's peak memory must not see what an earlier one cached, and its first forward's one-time
allocations count, as they do when a model reranks. Why forked from a server: a new interpreter per measurement paid
torch's and transformers' imports each time, about 7 s of the ~8 s a small measurement took on the 2-core machine; a
fork of a server that has them starts in milliseconds. The server has touched no GPU and holds no model, so every
child starts as a new process would, with the imports already done. It runs with glibc's mmap threshold at 64 KiB (as
``MALLOC_MMAP_THRESHOLD_=65536`` sets it at start-up), so tensors are mapped and unmapped, not kept in the heap, and a
child's peak memory is what its forwards took.

Where the server comes from:
- **A process where forking is safe** forks it from itself (:func:`start_here`, which ``cli.main`` calls for a stage
  module with ``fresh_preload``), after the imports. Starting ``multiprocessing``'s forkserver instead cost each bench
  job ~9 s on the 2-core machine: a second interpreter importing torch and transformers again.
- **Anywhere else** (a test session that computed with torch before calling ``cli.main``, or a stage's ``run``
  called directly) measurements go to ``multiprocessing``'s forkserver: a clean interpreter started once with the
  modules preloaded. A fork of a process that has run an OpenMP parallel region (torch's CPU ops, MKL's) hangs in its
  child's first one: GNU OpenMP keeps its worker threads in a pool that the child inherits without the threads.
  Whether forking is safe is checked, not assumed (:func:`fork_is_safe`): a probe forked at that moment runs one
  parallel region and must finish.

Every wait is bounded (``timeout_s``, :data:`MEASUREMENT_TIMEOUT_S` unless given): a measurement that does not answer
within it is killed and :class:`MeasurementHung` names it and where its output went."""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import importlib
import logging
import multiprocessing
import os
import signal
import time
import traceback
from dataclasses import dataclass
from multiprocessing import forkserver
from multiprocessing.connection import Connection

from longrank.processes import end_with_parent

log = logging.getLogger(__name__)

# Imported by the server before it forks: the encoders' modules are what a new interpreter spent most of its time on
# (transformers imports them lazily, on the first from_pretrained). The word models need none of them, and a stage
# that measures only word models says so (``start_here``'s ``preload``): they cost ~5 s of the 2-core machine.
TORCH = ("torch",)
ENCODERS = ("transformers.models.auto.modeling_auto", "transformers.models.bert.modeling_bert")
PRELOAD = (*TORCH, *ENCODERS)

# How long one measurement may run before it counts as hung. The longest one a config asks for is a bench speed
# measurement: every length of a BERT-base encoder up to 4,000 tokens, batch 32, warm-up and repeats, alternating,
# on a CPU (a full-scale config whose `device: auto` finds no GPU): tens of minutes to an hour on a few shared cores.
# Four hours is several times that: past it the child is stuck (a deadlock, as a fork after OpenMP gives), not slow.
MEASUREMENT_TIMEOUT_S = 4 * 3600.0
# The server answers within its child's bound plus the time to kill and reap it; past this margin it is stuck itself.
SERVER_MARGIN_S = 60.0
# A process that has sent its answer only closes its pipe and exits: seconds even on a loaded machine.
EXIT_TIMEOUT_S = 30.0
# The fork probe's parallel region takes milliseconds; a loaded 2-core machine may stretch it to a second. A probe
# slower than this counts as hung, which only sends the measurements to the forkserver (safe, ~9 s slower).
PROBE_TIMEOUT_S = 5.0
# The probe's tensor: eight times ATen's grain (32,768 elements), so its elementwise op runs as a parallel region
PROBE_ELEMENTS = 1 << 18


class MeasurementHung(RuntimeError):
    """A measuring process (or the server forking them) did not answer within its bound and was killed."""


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
    measurements need: a stage module's ``fresh_preload(args)``), where :func:`fork_is_safe` says a fork works;
    elsewhere do nothing, and ``module``'s measurements go to the forkserver. ``cli.main`` calls it between a bench
    stage's imports and its ``run``. The server ends when this process closes its end of the connection (at exit at
    the latest)."""
    if module in _here:
        return
    # Imported here, before the fork, not in the server: the stage's own model load then finds them too, where the
    # server and the stage each importing them cost a bench job ~3 s more of the 2-core machine.
    for name in (*preload, module):
        importlib.import_module(name)
    if not fork_is_safe():
        log.info("a fork of this process hangs in torch's parallel code (it has run some): measuring in the forkserver")
        return
    ours, its = multiprocessing.Pipe()
    stage = os.getpid()
    pid = os.fork()
    if pid == 0:  # the server: never returns; killed with the stage, whose end it would otherwise see only at recv
        end_with_parent(stage)
        ours.close()
        _serve(module, its)
    its.close()
    _here[module] = (ours, pid)
    atexit.register(_stop, module)


def fork_is_safe() -> bool:
    """Whether a child forked from this process now runs torch's parallel code: a probe forked now runs one
    parallel region (elementwise and MKL's matrix product) at two threads at least (a measurement may ask for more
    threads than this process uses) and must exit cleanly within :data:`PROBE_TIMEOUT_S`. It checks the failure
    itself, whatever its cause (OpenMP's inherited pool, a lock another thread held at the fork); a probe that is
    only slow counts as unsafe, which costs time, never a hang. Counting this process's threads cannot tell: numpy's
    and scipy's OpenBLAS start theirs at import (fork-safe: they re-create them in a child), and torch does not say
    whether OpenMP's pool exists."""
    import torch

    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            torch.set_num_threads(max(2, torch.get_num_threads()))
            torch.ones(PROBE_ELEMENTS).mul_(2)
            torch.ones(256, 256) @ torch.ones(256, 256)
            code = 0
        finally:
            os._exit(code)
    return _reap(pid, PROBE_TIMEOUT_S) == 0


def _reap(pid: int, timeout_s: float) -> int | None:
    """Wait up to ``timeout_s`` for child ``pid`` to exit: its exit code, or None where it had not and was killed."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)  # a SIGKILLed process is reaped at once
    return None


def _stop(module: str) -> None:
    if module not in _here:  # a hung server, already killed
        return
    connection, pid = _here.pop(module)
    connection.close()  # the server exits on it at once, unless a measurement is still running (an interrupted stage)
    _reap(pid, EXIT_TIMEOUT_S)


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
            try:  # unbounded by design: the stage sends the next job when it wants one, and its exit ends the wait
                job, timeout_s = connection.recv()
            except EOFError:  # the stage is done
                break
            try:
                connection.send(_fork_child(module, job, timeout_s))
            except MeasurementHung as hung:
                connection.send(hung)
    finally:
        os._exit(0)


def _fork_child(module: str, job: dict, timeout_s: float) -> Outcome:
    receive, send = multiprocessing.Pipe(duplex=False)
    server = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            end_with_parent(server)  # a server killed mid-measurement takes its measuring child with it
            receive.close()
            _child(module, job, send)
        finally:
            os._exit(0)
    send.close()
    if not receive.poll(timeout_s):
        receive.close()
        _reap(pid, 0)
        raise MeasurementHung(_hung_message(module, job, timeout_s, f"process {pid}"))
    outcome = _outcome_from(receive)
    exitcode = _reap(pid, EXIT_TIMEOUT_S)
    return outcome or _ended(-signal.SIGKILL if exitcode is None else exitcode)


def _hung_message(module: str, job: dict, timeout_s: float, who: str) -> str:
    what = ", ".join(f"{key}={job[key]}" for key in ("kind", "attention", "length", "do") if key in job)
    return (
        f"the measurement {module}.measure({what}) in {who} did not answer within {timeout_s:.0f} s and was killed; "
        f"its output (stderr) went to {_stderr_target()}"
    )


def _stderr_target() -> str:
    """Where this process's (and so its children's) standard error goes: a log file's path, else what it is."""
    try:
        target = os.readlink("/proc/self/fd/2")
    except OSError:
        return "this process's standard error"
    return target if target.startswith("/") and not target.startswith("/dev/") else f"this process's stderr ({target})"


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


def measure_in_fresh_process(module: str, job: dict, timeout_s: float = MEASUREMENT_TIMEOUT_S) -> Outcome:
    """``module.measure(job)`` in a new child of ``module``'s server (the one forked here, else the forkserver); its
    result, traceback or exit code. Raises :class:`MeasurementHung` where it does not answer within ``timeout_s``."""
    if module in _here:
        return _through_server(module, job, timeout_s)
    context = _context(module)
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(module, job, send), daemon=True)
    child.start()
    send.close()
    if not receive.poll(timeout_s):
        receive.close()
        child.kill()
        child.join(EXIT_TIMEOUT_S)
        raise MeasurementHung(_hung_message(module, job, timeout_s, f"process {child.pid} (forkserver)"))
    outcome = _outcome_from(receive)
    child.join(EXIT_TIMEOUT_S)
    if child.exitcode is None:  # answered but did not exit: its answer stands
        child.kill()
        child.join(EXIT_TIMEOUT_S)
    assert child.exitcode is not None, "killed and joined: it has ended"
    return outcome or _ended(child.exitcode)


def _through_server(module: str, job: dict, timeout_s: float) -> Outcome:
    connection, pid = _here[module]
    try:
        connection.send((job, timeout_s))
        if not connection.poll(timeout_s + SERVER_MARGIN_S):
            _here.pop(module)
            connection.close()
            _reap(pid, 0)
            raise MeasurementHung(_hung_message(module, job, timeout_s + SERVER_MARGIN_S, f"the server {pid}"))
        answer = connection.recv()
    except (EOFError, BrokenPipeError):
        return Outcome(None, error="the measuring server ended before it answered", exitcode=-1)
    if isinstance(answer, MeasurementHung):
        raise answer
    return answer
