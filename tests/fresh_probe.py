"""A measuring module for tests/test_bench_fresh.py: ``measure(job)`` does what ``job["do"]`` says in the child."""

import os
import signal
import time

SEEN = []  # a child's state: a fresh process starts with it empty


def measure(job: dict) -> dict:
    if job["do"] == "raise":
        raise ValueError("the measurement's own error")
    if job["do"] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if job["do"] == "hang":  # as a child stuck in a deadlock: never answers
        if "pid_file" in job:  # for a test that kills what is above it
            with open(job["pid_file"], "w") as out:
                out.write(str(os.getpid()))
        time.sleep(3600)
    if job["do"] == "parallel":  # one of torch's OpenMP parallel regions (what hangs in a fork of a computed process)
        import torch

        torch.set_num_threads(2)
        return {"sum": float(torch.ones(1 << 18).mul_(2).sum())}
    SEEN.append(job["do"])
    return {"seen": list(SEEN), "pid": os.getpid(), "mmap_threshold": os.environ.get("MALLOC_MMAP_THRESHOLD_")}
