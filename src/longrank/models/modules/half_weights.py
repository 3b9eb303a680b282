"""Linear layers' weights held in autocast's half type during inference, cast once instead of on every call.

Why: under ``torch.autocast`` a linear layer casts its fp32 weight and bias to the half type each time it runs. For
MORES Reuse-S2 on an H100 in bf16 those casts (about 220 per pass: the query module's and the interaction blocks'
linear layers) were ~1 ms of a 5.8 ms pass, replayed inside its CUDA graphs (docs/studies/speed.md). Autocast's own
cast cache does not help there: it lives only as long as one autocast context, and a CUDA graph must be captured
with it off.

``held_half(modules)`` swaps every ``nn.Linear`` weight and bias under ``modules`` for a half copy while the block
runs, when autocast is on in bf16 or fp16 and no gradient is taken, and puts them back after. Autocast would have
cast the same fp32 values to the same type, so the scores are bit for bit the autocast ones (tests/test_mores.py).
The copies are made once per (type, weights' versions) and kept on the first module: a weight changed in place
(``load_state_dict``, an optimiser step) bumps its version, so stale copies are never read. The context yields a
key that names the copies in use (``None`` when nothing is swapped), for CUDA graphs that record their addresses.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn

HALF_TYPES = (torch.bfloat16, torch.float16)


def _linears(modules: list[nn.Module]) -> list[nn.Linear]:
    """The linear layers under ``modules``, each once (tied layers), found once per set of modules: walking a
    BERT's module tree on every call cost more host time than the casts saved GPU time. A layer added later is
    not swapped (autocast casts it, the same values); one removed is swapped in vain, never read."""
    found = modules[0].__dict__.setdefault("_held_half_linears", {})
    key = tuple(id(m) for m in modules)
    if key not in found:
        seen, out = set(), []
        for root in modules:
            for module in root.modules():
                if isinstance(module, nn.Linear) and id(module) not in seen:
                    seen.add(id(module))
                    out.append(module)
        found[key] = out
    return found[key]


@contextlib.contextmanager
def held_half(modules: list[nn.Module], device: torch.device) -> Iterator[tuple | None]:
    device_type = torch.device(device).type
    dtype = torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else None
    if dtype not in HALF_TYPES or torch.is_grad_enabled() or any(m.training for m in modules):
        yield None
        return
    linears = _linears(modules)
    originals = [(m, name, m._parameters[name]) for m in linears for name in ("weight", "bias")]
    originals = [(m, name, p) for m, name, p in originals if p is not None]
    if any(p.dtype != torch.float32 for _, _, p in originals):  # already swapped (a nested call) or not fp32
        yield None
        return
    key = (dtype, tuple((p.data_ptr(), p._version) for _, _, p in originals))
    cache = modules[0].__dict__.setdefault("_held_half", {})
    copies = cache.get(key)
    if copies is None:
        cache.clear()  # one set of copies per module: older ones are stale or of the other type
        copies = cache[key] = [p.detach().to(dtype) for _, _, p in originals]
    try:
        for (module, name, _), copy in zip(originals, copies):
            module._parameters[name] = copy  # a plain tensor: nn.Module's setattr would demand a Parameter
        yield key
    finally:
        for module, name, original in originals:
            module._parameters[name] = original
