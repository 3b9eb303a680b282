"""bench.fresh: each measurement in a new child of a server, its result, traceback or exit code back; the server
forked from the caller (a bench stage from the command line) or multiprocessing's forkserver (any other caller)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from longrank.bench.fresh import MeasurementHung, measure_in_fresh_process

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


@pytest.mark.stage  # starts a server or an interpreter with torch and transformers: seconds each
def test_each_measurement_is_a_fresh_process_with_the_mmap_threshold_set(sequence):
    before = os.environ.get("MALLOC_MMAP_THRESHOLD_")
    outcomes, caller, after = sequence
    first, second = outcomes[:2]
    assert first["result"]["seen"] == ["a"] and second["result"]["seen"] == ["b"]  # nothing carried over
    assert len({first["result"]["pid"], second["result"]["pid"], caller}) == 3
    assert first["result"]["mmap_threshold"] == second["result"]["mmap_threshold"] == "65536"
    assert after == before  # set for the server only


@pytest.mark.stage  # starts a server or an interpreter with torch and transformers: seconds each
def test_a_failing_measurement_returns_its_traceback_and_the_next_one_runs(sequence):
    failed, next_one = sequence[0][2:4]
    assert failed["result"] is None
    assert "ValueError: the measurement's own error" in failed["error"]
    assert next_one["result"]["seen"] == ["a"]


@pytest.mark.stage  # starts a server or an interpreter with torch and transformers: seconds each
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


# A process that computed with torch before it measures: a test session calling cli.main after other tests did
COMPUTED_FIRST = """
import json, sys, time
import torch
from longrank.bench import fresh
torch.set_num_threads(2)
torch.ones(1 << 20).exp()  # an OpenMP parallel region: GNU OpenMP now holds a pool of worker threads
fresh.start_here("fresh_probe")
start = time.monotonic()
outcome = fresh.measure_in_fresh_process("fresh_probe", {"do": "parallel"})
print(json.dumps({"forked_here": "fresh_probe" in fresh._here, "result": outcome.result, "error": outcome.error,
                  "seconds": time.monotonic() - start}))
"""

# A measurement that never answers, under a bound of two seconds, then one that does, through the server forked here
HUNG_HERE = """
import json, sys, time
from longrank.bench import fresh
fresh.start_here("fresh_probe")
start = time.monotonic()
try:
    fresh.measure_in_fresh_process("fresh_probe", {"do": "hang"}, timeout_s=2)
    error = None
except fresh.MeasurementHung as hung:
    error = str(hung)
seconds = time.monotonic() - start
after = fresh.measure_in_fresh_process("fresh_probe", {"do": "a"}, timeout_s=60)
print(json.dumps({"forked_here": "fresh_probe" in fresh._here, "error": error, "seconds": seconds,
                  "after": after.result}))
"""


def run_script(script: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.stage  # starts a server or an interpreter with torch and transformers: seconds each
def test_a_fresh_process_is_safe_to_fork_and_one_that_ran_a_parallel_region_is_not():
    out = run_script(
        "from longrank.bench import fresh; import torch; torch.set_num_threads(2); before = fresh.fork_is_safe(); "
        "torch.ones(1 << 20).exp(); print(__import__('json').dumps([before, fresh.fork_is_safe()]))"
    )
    assert out == [True, False]


@pytest.mark.stage  # starts a server or an interpreter with torch and transformers: seconds each
def test_a_process_that_computed_with_torch_measures_in_the_forkserver_and_finishes():
    out = run_script(COMPUTED_FIRST)
    assert not out["forked_here"], "the server was forked from a process that ran OpenMP: its children hang"
    assert out["error"] == "" and out["result"]["sum"] == float(2 << 18)


@pytest.mark.stage  # starts a server or an interpreter with torch and transformers: seconds each
def test_a_hung_measurement_in_a_server_forked_here_is_killed_within_its_bound_with_a_clear_error():
    out = run_script(HUNG_HERE)
    assert out["forked_here"]
    assert "fresh_probe.measure(do=hang)" in out["error"] and "did not answer within 2 s" in out["error"]
    assert "its output (stderr) went to" in out["error"]
    assert 2 <= out["seconds"] < 15
    assert out["after"]["seen"] == ["a"]  # the server goes on measuring


@pytest.mark.stage  # starts a server or an interpreter with torch and transformers: seconds each
def test_a_hung_measurement_in_the_forkserver_is_killed_within_its_bound_with_a_clear_error():
    measure_in_fresh_process("fresh_probe", {"do": "a"})  # the forkserver started: its start is not the bound's
    start = time.monotonic()
    with pytest.raises(MeasurementHung, match=r"fresh_probe\.measure\(do=hang\) .*did not answer within 2 s"):
        measure_in_fresh_process("fresh_probe", {"do": "hang"}, timeout_s=2)
    assert time.monotonic() - start < 15
    assert measure_in_fresh_process("fresh_probe", {"do": "a"}).result["seen"] == ["a"]


# A bench stage measuring for an hour, whose server and measuring child are looked for from outside
HANGING_STAGE = """
import sys
from longrank.bench import fresh
fresh.start_here("fresh_probe")
fresh.measure_in_fresh_process("fresh_probe", {"do": "hang", "pid_file": sys.argv[1]}, timeout_s=3600)
"""


def alive(pid: int) -> bool:
    """Whether ``pid`` runs: a zombie (killed, its parent gone and nobody reaping it) has ended."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.mark.stage  # starts an interpreter with torch and transformers: seconds
def test_a_killed_stage_takes_its_server_and_the_measuring_child_with_it(tmp_path):
    """``kill -9`` of a bench stage skips every cleanup: the kernel ends the server it forked and the server's
    measuring child (parent-death signals), rather than leaving them measuring for the bound's hours."""
    from longrank.processes import parent_of

    pid_file = tmp_path / "child.pid"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    stage = subprocess.Popen([sys.executable, "-c", HANGING_STAGE, str(pid_file)], env=env)
    try:
        deadline = time.monotonic() + 120
        while not pid_file.exists() or not pid_file.read_text():
            assert stage.poll() is None and time.monotonic() < deadline, "the measurement did not start"
            time.sleep(0.1)
        child = int(pid_file.read_text())
        server = parent_of(child)
        assert server is not None and server != stage.pid and parent_of(server) == stage.pid
    finally:
        stage.kill()
        stage.wait()
    deadline = time.monotonic() + 10
    while (alive(child) or alive(server)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(server) and not alive(child)
