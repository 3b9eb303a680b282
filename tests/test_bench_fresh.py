"""bench.fresh: each measurement in a new child of a fork server, its result, traceback or exit code back."""

import os
import signal

from longrank.bench.fresh import measure_in_fresh_process


def test_each_measurement_is_a_fresh_process_with_the_mmap_threshold_set():
    before = os.environ.get("MALLOC_MMAP_THRESHOLD_")
    first = measure_in_fresh_process("fresh_probe", {"do": "a"})
    second = measure_in_fresh_process("fresh_probe", {"do": "b"})
    assert first.result["seen"] == ["a"] and second.result["seen"] == ["b"]  # nothing carried over
    assert len({first.result["pid"], second.result["pid"], os.getpid()}) == 3
    assert first.result["mmap_threshold"] == "65536"
    assert os.environ.get("MALLOC_MMAP_THRESHOLD_") == before  # set for the server only


def test_a_failing_measurement_returns_its_traceback():
    outcome = measure_in_fresh_process("fresh_probe", {"do": "raise"})
    assert outcome.result is None
    assert "ValueError: the measurement's own error" in outcome.error


def test_a_killed_measurement_returns_its_signal():
    outcome = measure_in_fresh_process("fresh_probe", {"do": "kill"})
    assert outcome.result is None and outcome.exitcode == -signal.SIGKILL
    assert "exit code" in outcome.error
