"""One measurement in a fresh process, forked from a server that has only imported the measuring code.

Why fresh: a measurement's peak memory must not see what an earlier one cached, and its first forward's one-time
allocations count, as they do when a model reranks. Why forked from a server (``multiprocessing``'s forkserver,
started once per bench job with the measuring module and the encoders' ``transformers`` modules preloaded): a new
interpreter per measurement paid torch's and transformers' imports each time, about 7 s of the ~8 s a small
measurement took on the 2-core machine; a fork of the server starts in milliseconds. The server is a clean
interpreter (not a fork of the caller): it has touched no GPU and holds no model, so every child starts as a new
process would, with the imports already done. The server runs with glibc's mmap threshold at 64 KiB
(``MALLOC_MMAP_THRESHOLD_=65536``, as each new interpreter did), so tensors are mapped and unmapped, not kept in the
heap, and a child's peak memory is what its forwards took."""

from __future__ import annotations

import importlib
import multiprocessing
import os
import traceback
from dataclasses import dataclass
from multiprocessing import forkserver

# Imported by the server before it forks: the encoders' modules are what a new interpreter spent most of its time on
# (transformers imports them lazily, on the first from_pretrained); the word models need none of them.
PRELOAD = ("torch", "transformers.models.auto.modeling_auto", "transformers.models.bert.modeling_bert")


@dataclass(frozen=True)
class Outcome:
    """What a child returned (``result``), or why it returned nothing: its traceback (``error``) or its exit code
    (``exitcode``, negative for a signal, as ``-signal.SIGKILL`` from the kernel's OOM killer)."""

    result: dict | None
    error: str = ""
    exitcode: int = 0


_started: list[str] = []


def _context(module: str) -> multiprocessing.context.BaseContext:
    """The fork server, started on first use with ``module`` preloaded and glibc's mmap threshold in its
    environment, so that every child allocates as a new interpreter started with it would. multiprocessing keeps
    one server per process: a bench job measures with one module, and a second module (in a test session) is
    imported by each child instead."""
    context = multiprocessing.get_context("forkserver")
    if not _started:
        context.set_forkserver_preload([*PRELOAD, module])
        previous = os.environ.get("MALLOC_MMAP_THRESHOLD_")
        os.environ["MALLOC_MMAP_THRESHOLD_"] = "65536"
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
    """``module.measure(job)`` in a new child of ``module``'s fork server; its result, traceback or exit code."""
    context = _context(module)
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(module, job, send), daemon=True)
    child.start()
    send.close()
    try:
        outcome = receive.recv()
    except EOFError:  # the child died before it sent anything (a signal, os._exit)
        outcome = None
    child.join()
    if outcome is None:
        return Outcome(
            None, error=f"the measuring process ended with exit code {child.exitcode}", exitcode=child.exitcode
        )
    return outcome
