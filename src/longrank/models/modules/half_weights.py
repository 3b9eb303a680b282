"""Linear layers' weights held in autocast's half type during inference, cast once instead of on every call.

Why: under ``torch.autocast`` a linear layer casts its fp32 weight and bias to the half type each time it runs. For
MORES Reuse-S2 on an H100 in bf16 those casts (about 220 per pass: the query module's and the interaction blocks'
linear layers) were ~1 ms of a 5.8 ms pass, replayed inside its CUDA graphs (docs/studies/speed.md). Autocast's own
cast cache does not help there: it lives only as long as one autocast context, and a CUDA graph must be captured
with it off.

``held_half(modules)`` swaps every ``nn.Linear`` weight and bias under ``modules`` for a half copy while the block
runs, when autocast is on in bf16 or fp16 and no gradient is taken, and puts them back after
(``half_copies(modules)`` and its ``swapped()``: the same in two steps, for a CUDA graph that needs the key on every
call and the swap only when it captures). Autocast would have cast the same fp32 values to the same type, so the scores are bit for bit the autocast ones (tests/test_mores.py).
The copies are made once per (type, weights' versions) and kept on the first module: a weight changed in place
(``load_state_dict``, an optimiser step) bumps its version, so stale copies are never read. The context yields a
key that names the copies in use (``None`` when nothing is swapped), for CUDA graphs that record their addresses.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import cast

import torch
from torch import nn

HALF_TYPES = (torch.bfloat16, torch.float16)


def _linears(modules: list[nn.Module]) -> list[nn.Linear]:
    """The linear layers under ``modules``, each once (tied layers). Walked once per set of modules (``_slots``):
    walking a BERT's module tree on every call cost more host time than the casts saved GPU time. A layer added
    later is not swapped (autocast casts it, the same values); one removed is swapped in vain, never read."""
    seen, out = set(), []
    for root in modules:
        for module in root.modules():
            if isinstance(module, nn.Linear) and id(module) not in seen:
                seen.add(id(module))
                out.append(module)
    return out


class HalfCopies:
    """The half copies of ``modules``' linear weights for one (type, weights' versions): ``key`` names them (CUDA
    graphs that recorded their addresses are keyed by it), ``swapped()`` puts them in place while a block runs."""

    def __init__(self, slots: list[tuple[nn.Module, str]], copies: list[torch.Tensor], key: tuple):
        self.slots, self.copies, self.key = slots, copies, key

    @contextlib.contextmanager
    def swapped(self) -> Iterator[tuple]:
        originals = [module._parameters[name] for module, name in self.slots]
        try:
            for (module, name), copy in zip(self.slots, self.copies):
                # a plain tensor, deliberately: nn.Module's setattr would demand a Parameter (as the stubs do)
                module._parameters[name] = copy  # type: ignore[assignment]
            yield self.key
        finally:
            for (module, name), original in zip(self.slots, originals):
                module._parameters[name] = original


def half_copies(modules: list[nn.Module], device: torch.device) -> HalfCopies | None:
    """The copies to hold while ``modules`` run for inference under bf16 or fp16 autocast on ``device`` (made on
    first use, then found by the weights' addresses and versions), or ``None`` where nothing is to be swapped. Only
    the key is computed on a call that finds its copies: a CUDA graph replayed with them runs no module code, so it
    needs no swap (``GraphCache``'s ``around``), and the swap's host time (~0.1 ms a call for a BERT's linear
    layers) stays off the GPU's critical path."""
    device_type = torch.device(device).type
    dtype = torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else None
    if dtype not in HALF_TYPES or torch.is_grad_enabled() or any(m.training for m in modules):
        return None
    slots = _slots(modules)
    # _slots holds only the parameters that are set (a layer's bias may be None)
    params = cast(list[torch.Tensor], [module._parameters[name] for module, name in slots])
    if any(p.dtype != torch.float32 for p in params):  # already swapped (a nested call) or not fp32
        return None
    key = (dtype, tuple((p.data_ptr(), p._version) for p in params))
    cache = modules[0].__dict__.setdefault("_held_half", {})
    held = cache.get(key)
    if held is None:
        cache.clear()  # one set of copies per module: older ones are stale or of the other type
        held = cache[key] = HalfCopies(slots, [p.detach().to(dtype) for p in params], key)
    return held


def _slots(modules: list[nn.Module]) -> list[tuple[nn.Module, str]]:
    """(linear layer, "weight" / "bias") of every parameter ``half_copies`` holds, found once per set of modules."""
    found = modules[0].__dict__.setdefault("_held_half_slots", {})
    key = tuple(id(m) for m in modules)
    if key not in found:
        found[key] = [
            (m, name) for m in _linears(modules) for name in ("weight", "bias") if m._parameters[name] is not None
        ]
    return found[key]


@contextlib.contextmanager
def held_half(modules: list[nn.Module], device: torch.device) -> Iterator[tuple | None]:
    """``half_copies`` swapped in for the block (yields their key, ``None`` when nothing is swapped)."""
    held = half_copies(modules, device)
    if held is None:
        yield None
        return
    with held.swapped() as key:
        yield key
