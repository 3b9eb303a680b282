"""CUDA graphs for a model's fixed-shape inference steps (MORES's query module and interaction blocks).

Why: scoring 1,000 candidates with MORES Reuse-S2 is a few hundred small kernels (16 query tokens per candidate),
so on an H100 the GPU waited for the Python that launches them: 4.6 ms of GPU work took 12.7 ms
(docs/studies/speed.md). A graph records the launches once per input shape and replays them with one call. Shapes
are fixed inside a rerank batch (one query, the batch's candidates), so a cache of a few graphs serves a whole run.

``GraphCache(fn)`` calls ``fn(*tensors)`` through a graph per signature (the tensors' shapes, dtypes, devices and
whether they are stride-0 expansions, the autocast state, and a caller's ``key``); a ``None`` in place of a tensor
(an absent mask) is passed through. The first call of a signature warms ``fn`` up on a side stream and captures it;
later calls copy the inputs into the captured buffers, replay and return a copy of the output. Only for CUDA tensors
under ``no_grad``; tensors the graph must read in place from one call to the next (a resident store, weights held
in half precision) are the caller's to put in ``key`` and close over. If capturing fails once (an operation that
cannot be captured), the cache logs why and runs ``fn`` eagerly from then on.
"""

from __future__ import annotations

import contextlib
import logging
from collections import OrderedDict

import torch

log = logging.getLogger(__name__)


class GraphCache:
    def __init__(self, fn, max_graphs: int = 4):
        self.fn, self.max_graphs = fn, max_graphs
        self.graphs: OrderedDict = OrderedDict()
        self.broken: str | None = None

    def __call__(self, *tensors: torch.Tensor, key: tuple = (), around=contextlib.nullcontext):
        """``around``: a context manager factory entered wherever ``fn`` itself runs (capture, eager), not around a
        replay (held half weights: swapped in while the graph records their addresses, not on every replay)."""
        if self.broken is not None or torch.is_grad_enabled() or tensors[0].device.type != "cuda":
            with around():
                return self.fn(*tensors)
        autocast = torch.is_autocast_enabled("cuda")
        signature = (
            key,
            autocast,
            torch.get_autocast_dtype("cuda") if autocast else None,
            *(None if t is None else (t.shape, t.dtype, t.device, t.dim() > 0 and t.stride(0) == 0) for t in tensors),
        )
        entry = self.graphs.get(signature)
        if entry is None:
            try:
                with around():
                    entry = self._capture(tensors, autocast)
            except Exception as err:  # noqa: BLE001 - any capture failure: run eagerly, once logged
                self.broken = f"{type(err).__name__}: {err}"
                log.warning("CUDA graph capture failed (%s); running eagerly", self.broken)
                torch.cuda.synchronize()
                with around():
                    return self.fn(*tensors)
            self.graphs[signature] = entry
            if len(self.graphs) > self.max_graphs:
                self.graphs.popitem(last=False)
        graph, static, out = entry
        for buffer, t in zip(static, tensors):
            if buffer is not None:
                buffer.copy_(t[:1] if buffer.shape[0] == 1 and t.stride(0) == 0 else t)
        graph.replay()
        return out.clone()

    def _capture(self, tensors, autocast: bool):
        # A stride-0 batch (one query for every candidate) is kept as one row and expanded inside the graph.
        static = [
            None if t is None else t[:1].clone() if t.dim() > 0 and t.stride(0) == 0 else t.clone() for t in tensors
        ]
        shapes = [None if t is None else t.shape for t in tensors]

        def run():
            args = [b.expand(shape) if b is not None and b.shape != shape else b for b, shape in zip(static, shapes)]
            if autocast:  # no weight-cast cache: casts made during capture must be replayed, not remembered
                with torch.autocast("cuda", dtype=torch.get_autocast_dtype("cuda"), cache_enabled=False):
                    return self.fn(*args)
            return self.fn(*args)

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):  # warm-up: kernels compiled and autotuned, allocator settled, outside the capture
                run()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = run()
        return graph, static, out
