"""Peak memory of a region of work, as the benches measure it (:class:`MemoryProbe`; the method is described in
:mod:`longrank.bench.bench`'s docstring and written into each probe's ``method``)."""

from __future__ import annotations

import resource

import torch

from longrank.bench.fresh import glibc


class MemoryProbe:
    """Peak memory growth from construction to ``peak_mb()`` (see the module docstring for the method)."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        if self.cuda:
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
            self.base = torch.cuda.memory_allocated(device)
            self.method = (
                "torch.cuda.max_memory_allocated during the forwards minus memory allocated before them "
                "(model weights and inputs excluded)."
            )
            return
        libc = glibc()
        if libc:
            libc.malloc_trim(0)
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # reset the RSS high-water mark (Linux >= 4.0)
            self.hwm = True
            self.base = _proc_status_kb("VmRSS")
            self.method = (
                "peak resident set growth of a fresh process during the forwards (VmHWM reset via "
                "/proc/self/clear_refs after loading the model; VmHWM after minus VmRSS before)."
            )
        except OSError:
            self.hwm = False
            self.base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            self.method = (
                "growth of the process's lifetime peak RSS (ru_maxrss) during the forwards; a lower bound "
                "(/proc/self/clear_refs was not writable)."
            )

    def peak_mb(self) -> float:
        if self.cuda:
            return (torch.cuda.max_memory_allocated() - self.base) / 2**20
        peak = _proc_status_kb("VmHWM") if self.hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return max(0, peak - self.base) / 1024.0


def _proc_status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"{field} not in /proc/self/status")
