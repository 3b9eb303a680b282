"""One trainer per training state (``longrank.results.trainer_lock``, ``longrank.train.starter``): a second trainer on a state in use is refused
naming the state and the holder, and trains once the first has ended; a training whose Snakemake process was killed
stops; and the results lock is not taken over from a killed workflow while one of its trainings still runs."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from longrank.errors import InputError
from longrank.results import lock as results_lock
from longrank.results.trainer_lock import LOCK_NAME, holding_state, live_trainer, live_trainers

KNRM = {
    "type": "knrm",
    "max_doc_len": 60,
    # many small steps: the trainer is still at work when the test looks
    "train": {"steps": 100000, "batch_size": 2, "lr": 0.01, "eval_every": 20, "patience": 100000},
}
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def train_command(tiny_data: Path, model_cfg: dict = KNRM) -> list[str]:
    return [
        sys.executable,
        "-m",
        "longrank",
        "train",
        "--model",
        "knrm",
        "--model-config",
        json.dumps(model_cfg),
        "--data",
        str(tiny_data / "data"),
        "--candidates",
        str(tiny_data / "bm25.run"),
        "--rerank-depth",
        "30",
        "--device",
        "cpu",
        "--out",
        str(tiny_data / "results" / "models" / "knrm" / "fold0" / "model.safetensors"),
    ]


def wait_for(condition, process: subprocess.Popen | None = None, bound_s: float = 180.0) -> None:
    deadline = time.monotonic() + bound_s
    while not condition():
        assert process is None or process.poll() is None, "the process ended before the test could look"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def state_lock(tiny_data: Path) -> Path:
    return tiny_data / "results" / "models" / "knrm" / "fold0" / LOCK_NAME


def holder_pid(lock: Path) -> int | None:
    """The pid the lock's live holder wrote: None while nobody holds it, and also in the moment between a trainer
    taking the lock and writing its pid into it (live_trainer then says {})."""
    return (live_trainer(lock) or {}).get("pid")


def test_a_state_lock_is_exclusive_and_names_its_holder(tmp_path):
    state = tmp_path / "fold0" / "train_state"
    with holding_state(state):
        assert live_trainer(state.parent / LOCK_NAME)["pid"] == os.getpid()
        with pytest.raises(InputError) as err, holding_state(state):
            pass
        assert f"the training state {state} is in use by another trainer (process {os.getpid()} " in str(err.value)
    assert live_trainer(state.parent / LOCK_NAME) is None  # released: the next trainer takes it
    with holding_state(state):
        pass


@pytest.mark.stage
def test_a_second_trainer_on_a_state_in_use_is_refused_and_trains_after_the_first(tiny_data):
    first = subprocess.Popen(train_command(tiny_data), env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: holder_pid(state_lock(tiny_data)) is not None, first)
        quick = {**KNRM, "train": {**KNRM["train"], "steps": 4, "eval_every": 2}}
        second = subprocess.run(train_command(tiny_data, quick), env=ENV, capture_output=True, text=True, timeout=300)
        state = tiny_data / "results" / "models" / "knrm" / "fold0" / "train_state"
        assert second.returncode == 2, second.stderr[-3000:]
        assert f"the training state {state} is in use by another trainer (process {first.pid} " in second.stderr
        assert first.poll() is None  # the first trains on
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(first.pid, signal.SIGKILL)  # its lock goes with it
        first.wait(timeout=60)
    after = subprocess.run(train_command(tiny_data, quick), env=ENV, capture_output=True, text=True, timeout=600)
    assert after.returncode == 0, after.stderr[-3000:]
    assert (tiny_data / "results" / "models" / "knrm" / "fold0" / "model.safetensors").is_file()


def has_ended(pid: int) -> bool:
    try:
        return "\nState:\tZ" in Path(f"/proc/{pid}/status").read_text()  # ended, not yet reaped
    except OSError:
        return True


PARENT = """
import subprocess, sys, time
# Snakemake runs a job's command through a shell; this stands in for it (a file named snakemake)
subprocess.Popen(["bash", "-c", sys.argv[1] + "; echo shell-done"])
time.sleep(3600)
"""


@pytest.mark.stage
def test_a_training_whose_snakemake_was_killed_stops(tiny_data):
    fake = tiny_data / "bin" / "snakemake"
    fake.parent.mkdir()
    fake.write_text(textwrap.dedent(PARENT))
    log = tiny_data / "train.log"
    command = " ".join(f"'{a}'" for a in train_command(tiny_data)) + f" 2> '{log}'"
    parent = subprocess.Popen([sys.executable, str(fake), command], env=ENV, start_new_session=True)
    lock = state_lock(tiny_data)
    try:
        wait_for(lambda: holder_pid(lock) is not None, parent)
        trainer = holder_pid(lock)
        wait_for(lambda: "step 20/" in log.read_text())  # at work, a checkpoint set written
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=30)
        wait_for(lambda: live_trainer(lock) is None, bound_s=60)  # it stopped, and its lock went with it
        wait_for(lambda: has_ended(trainer), bound_s=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(parent.pid, signal.SIGKILL)
    text = log.read_text()
    assert f"the Snakemake process {parent.pid} that started this training has ended; stopped at step" in text
    assert "Traceback" not in text
    state = tiny_data / "results" / "models" / "knrm" / "fold0" / "train_state"
    assert any(p.name.startswith("step-") for p in state.iterdir())  # the last checkpoint kept


HOLDER = """
import sys, time
from pathlib import Path
from longrank.results.trainer_lock import holding_state
with holding_state(Path(sys.argv[1])):
    print("holding", flush=True)
    time.sleep(3600)
"""


def test_a_stale_results_lock_is_not_taken_over_while_a_training_of_it_runs(tmp_path):
    results = tmp_path / "results" / "tiny"
    state = results / "models" / "knrm" / "fold0" / "train_state"
    dead = subprocess.Popen(["true"])
    dead.wait()
    results.mkdir(parents=True)
    lock = results / results_lock.LOCK
    stale = {"pid": dead.pid, "host": os.uname().nodename, "workdir": "/gone", "started": "x"}
    lock.write_text(json.dumps(stale))
    trainer = subprocess.Popen([sys.executable, "-c", HOLDER, str(state)], stdout=subprocess.PIPE, text=True)
    try:
        assert trainer.stdout.readline() == "holding\n"
        assert [(s, who["pid"]) for s, who in live_trainers(results)] == [(state, trainer.pid)]
        for take in range(2):  # the killed workflow's stale lock, and no lock at all
            with pytest.raises(InputError) as err:
                results_lock.acquire(results, tmp_path, {"dataset": {"name": "tiny"}})
            assert "a training of this folder still runs" in str(err.value)
            assert f"{state} (process {trainer.pid}, since " in str(err.value)
            if take == 0:
                assert json.loads(lock.read_text()) == stale
            else:
                assert not lock.exists()
            lock.unlink(missing_ok=True)
    finally:
        trainer.kill()
        trainer.wait(timeout=30)
    results_lock.acquire(results, tmp_path, {"dataset": {"name": "tiny"}})  # the training ended: taken
    assert json.loads(lock.read_text())["pid"] == os.getpid()
    results_lock.release(results)


def test_a_file_system_without_flock_trains_unguarded_with_a_warning(tmp_path, monkeypatch, caplog):
    """Lustre mounted noflock or NFSv3 without lockd answer flock with ENOLCK / ENOSYS: the training runs, saying
    that one trainer per state is not checked there, and no trainer is seen holding it."""
    import errno
    import fcntl

    def no_flock(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_flock)
    state = tmp_path / "fold0" / "train_state"
    with caplog.at_level("WARNING"), holding_state(state):
        assert live_trainer(state.parent / LOCK_NAME) is None
    assert "cannot be locked on this file system" in caplog.text
