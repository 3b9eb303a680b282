"""Timing one region the same way in every bench: untimed warm-up passes, then repeated timed passes, each
bracketed by ``torch.cuda.synchronize`` on CUDA (kernels are asynchronous: without the barrier a pass would
time the launch, not the work), kept as an ``outputs.Timing`` (the median and its spread)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import torch

from longrank.errors import InputError
from longrank.results.stage_outputs import Timing

# At least this many timed passes: fewer leave the median to a single unlucky pass and the spread unmeasured.
MIN_REPEATS = 5


def median_of(repeats: int, passes: str, one: str) -> str:
    """How a bench's notes name its figure: "median of 5 timed batches (spread beside it)", or for one pass "one timed
    batch (1 run, no spread)": a single pass is one draw, not a median."""
    return f"median of {repeats} {passes} (spread beside it)" if repeats != 1 else f"one {one} (1 run, no spread)"


def synchronizer(device: torch.device | str) -> Callable[[], None]:
    """A barrier that waits for ``device``'s queued work (CUDA), or does nothing (CPU: calls are synchronous)."""
    device = torch.device(device)
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def check_repeats(repeats: int, warmup: int) -> None:
    if repeats < 1 or warmup < 0:
        raise InputError(f"repeats must be positive and warm-up passes non-negative, got {repeats} and {warmup}")


def time_region(fn: Callable[[], object], device: torch.device | str, repeats: int, warmup: int = 1) -> Timing:
    """``warmup`` untimed calls of ``fn`` (allocator, kernels, caches), then ``repeats`` timed ones."""
    return time_alternating({"only": fn}, device, repeats, warmup)["only"]


def time_alternating(
    fns: Mapping[str, Callable[[], object]], device: torch.device | str, repeats: int, warmup: int = 1
) -> dict[str, Timing]:
    """Each of ``fns`` warmed up, then timed in turn (a, b, a, b, ...): a machine whose load drifts (a shared
    CPU) slows every entry alike, so their ratio holds even where their absolute times wander."""
    check_repeats(repeats, warmup)
    sync = synchronizer(device)
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    sync()
    seconds: dict[str, list[float]] = {key: [] for key in fns}
    for _ in range(repeats):
        for key, fn in fns.items():
            sync()
            start = time.perf_counter()
            fn()
            sync()
            seconds[key].append(time.perf_counter() - start)
    return {key: Timing(seconds=s, warmup=warmup) for key, s in seconds.items()}
