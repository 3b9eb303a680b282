"""bench.fresh: each measurement in a new child of a server, its result, traceback or exit code back; the server
forked from the caller (a bench stage from the command line) or multiprocessing's forkserver (any other caller)."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from longrank.bench.fresh import measure_in_fresh_process

TESTS = Path(__file__).resolve().parent

# What a bench stage's process does (cli.main): fork the server before computing, then measure through it.
FORKED_HERE = """
import json, os, sys
from longrank.bench import fresh
fresh.start_here("fresh_probe")
outcomes = [fresh.measure_in_fresh_process("fresh_probe", {"do": do}) for do in sys.argv[1:]]
print(json.dumps({"caller": os.getpid(), "environment": os.environ.get("MALLOC_MMAP_THRESHOLD_"),
                  "outcomes": [vars(o) for o in outcomes]}))
"""


def measured(way: str, *dos: str) -> tuple[list[dict], int, str | None]:
    """The outcomes of measuring ``dos`` one after another, the caller's pid and its MALLOC_MMAP_THRESHOLD_ after."""
    if way == "forkserver":  # this test session is the caller
        outcomes = [vars(measure_in_fresh_process("fresh_probe", {"do": do})) for do in dos]
        return outcomes, os.getpid(), os.environ.get("MALLOC_MMAP_THRESHOLD_")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", FORKED_HERE, *dos], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    return out["outcomes"], out["caller"], out["environment"]


# One sequence per way, read by the tests below (a new interpreter with torch and transformers is seconds to start)
SEQUENCE = ("a", "b", "raise", "a", "kill", "a")


@pytest.fixture(scope="module", params=["forkserver", "forked_here"])
def sequence(request):
    return measured(request.param, *SEQUENCE)


def test_each_measurement_is_a_fresh_process_with_the_mmap_threshold_set(sequence):
    before = os.environ.get("MALLOC_MMAP_THRESHOLD_")
    outcomes, caller, after = sequence
    first, second = outcomes[:2]
    assert first["result"]["seen"] == ["a"] and second["result"]["seen"] == ["b"]  # nothing carried over
    assert len({first["result"]["pid"], second["result"]["pid"], caller}) == 3
    assert first["result"]["mmap_threshold"] == second["result"]["mmap_threshold"] == "65536"
    assert after == before  # set for the server only


def test_a_failing_measurement_returns_its_traceback_and_the_next_one_runs(sequence):
    failed, next_one = sequence[0][2:4]
    assert failed["result"] is None
    assert "ValueError: the measurement's own error" in failed["error"]
    assert next_one["result"]["seen"] == ["a"]


def test_a_killed_measurement_returns_its_signal_and_the_next_one_runs(sequence):
    killed, next_one = sequence[0][4:6]
    assert killed["result"] is None and killed["exitcode"] == -signal.SIGKILL
    assert "exit code" in killed["error"]
    assert next_one["result"]["seen"] == ["a"]


def test_the_command_line_forks_the_server_before_a_measuring_stage_runs(monkeypatch, tmp_path):
    """cli.main forks the server for every stage that measures in fresh processes, and before the stage's run; the
    server imports the encoders' modules only for a model on a pretrained encoder (or a config the stage refuses)."""
    import importlib

    from longrank import cli
    from longrank.bench import fresh

    measuring = sorted(
        s
        for s, (m, _) in cli.STAGES.items()
        if "measure_in_fresh_process" in Path(importlib.util.find_spec(m).origin).read_text()
    )
    assert measuring == ["attention_scaling", "bench"]
    events = []
    monkeypatch.setattr(fresh, "start_here", lambda module, preload: events.append(("server", module, preload)))
    runs = [("attention_scaling", [])] + [
        ("bench", ["--model", "m", "--model-config", config, "--checkpoint", "c", "--data", "d"])
        for config in ('{"type": "knrm"}', '{"type": "mores"}', "{}", "not json")
    ]
    for stage, argv in runs:
        module = importlib.import_module(cli.STAGES[stage][0])
        monkeypatch.setattr(module, "run", lambda args, stage=stage: events.append(("run", stage)))
        cli.main([stage, *argv, "--out", str(tmp_path / "out.json")])
    bench = "longrank.bench.bench"
    assert events == [
        ("server", "longrank.bench.attention_scaling", ("torch",)),
        ("run", "attention_scaling"),
        *(
            event
            for preload in (fresh.TORCH, fresh.PRELOAD, fresh.PRELOAD, fresh.PRELOAD)
            for event in (("server", bench, preload), ("run", "bench"))
        ),
    ]
    assert set(fresh.PRELOAD) - set(fresh.TORCH) == {
        "transformers.models.auto.modeling_auto",
        "transformers.models.bert.modeling_bert",
    }
