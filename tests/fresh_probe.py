"""A measuring module for tests/test_bench_fresh.py: ``measure(job)`` does what ``job["do"]`` says in the child."""

import os
import signal

SEEN = []  # a child's state: a fresh process starts with it empty


def measure(job: dict) -> dict:
    if job["do"] == "raise":
        raise ValueError("the measurement's own error")
    if job["do"] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    SEEN.append(job["do"])
    return {"seen": list(SEEN), "pid": os.getpid(), "mmap_threshold": os.environ.get("MALLOC_MMAP_THRESHOLD_")}
