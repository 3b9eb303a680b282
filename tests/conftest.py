"""Shared fixtures. Cranfield ships with the package; IRLeD, where a test needs it, is read from ../shared/data
(LONGRANK_SHARED) and the test is skipped with the reason where that is absent. Product code never reads ../shared."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("LONGRANK_SHARED", REPO.parent / "shared"))


def _empty_ir_datasets_home() -> Path:
    """An empty IR_DATASETS_HOME, set at import (ir_datasets reads it once): the tests never touch the user's
    ~/.ir_datasets, and Cranfield reaches ir_datasets the way it does on a fresh clone offline, copied from the
    package's bundled files by the data stage (longrank/data/bundled.py) before the real ir_datasets.load."""
    home = Path(tempfile.mkdtemp(prefix="ir_datasets_"))
    os.environ["IR_DATASETS_HOME"] = str(home)
    return home


IR_DATASETS_HOME = _empty_ir_datasets_home()


def pytest_unconfigure(config):
    """The session's ir_datasets cache goes with it: each holds copies of the synthetic collections, and a machine
    that runs the suite daily kept every one of them in /tmp."""
    import shutil

    shutil.rmtree(IR_DATASETS_HOME, ignore_errors=True)


# Model invariants run on the CPU everywhere and on the GPU too where one is visible (CI has none, so the
# CUDA cases are not generated there rather than skipped).
DEVICES = ["cpu"] + (["cuda"] if __import__("torch").cuda.is_available() else [])

# Every test starts on one torch thread, in one pytest process as under -n 2: the workflow's model jobs compute on one
# thread (MODEL_THREADS), the training fingerprint holds the thread count (a state trained on two threads is not
# resumed on one), and a test's numbers must depend neither on how the suite was started nor on a test before it that
# set another count (``_one_thread`` gives it back). Under -n 2 a second thread per worker would only wait for a core.
__import__("torch").set_num_threads(1)


@pytest.fixture(autouse=True)
def _one_thread():
    yield
    torch = __import__("torch")
    if torch.get_num_threads() != 1:  # a stage run in this process set its own (mores_speed --threads)
        torch.set_num_threads(1)


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(autouse=True, scope="module")
def _give_memory_back():
    """After each module, the memory its models freed goes back to the system. glibc keeps freed heap pages in the
    process (the full-scale models' training steps left pytest at 13 GB of the 23 GB machine), and what the suite's
    workflow jobs and the page cache then lack slows the rest of the run; ``malloc_trim`` returns them."""
    yield
    import ctypes
    import ctypes.util
    import gc

    gc.collect()
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    if hasattr(libc, "malloc_trim"):  # glibc's; musl and macOS have none
        libc.malloc_trim(0)


@pytest.fixture(scope="session")
def ir_datasets_home() -> Path:
    """ir_datasets' cache for the tests, with Cranfield in it (seeded from the package, as the data stage does)."""
    from longrank.data.bundled import seed_ir_datasets_cache

    seed_ir_datasets_cache("cranfield")
    assert (IR_DATASETS_HOME / "cranfield" / "docs.txt").exists()
    return IR_DATASETS_HOME


@pytest.fixture(scope="session")
def irled_dir() -> Path:
    """The FIRE 2017 IRLeD files (not downloadable: see config/irled.yaml). CI has them, so there
    (LONGRANK_REQUIRE_SHARED=1, set by .ci/run) their absence fails the tests that need them; on a user's machine
    without them those tests are skipped, saying why."""
    path = SHARED / "data" / "irled"
    if not (path / "docs.jsonl.gz").exists():
        why = f"IRLeD is not at {path} (set LONGRANK_SHARED to the directory holding data/irled)"
        if os.environ.get("LONGRANK_REQUIRE_SHARED") == "1":
            pytest.fail(why)
        pytest.skip(why)
    return path


E2E_CONFIG = REPO / "tests" / "e2e_config.yaml"


def snakemake_command(workdir: Path, *args: str, cores: int = 2) -> tuple[list[str], dict]:
    """The real workflow on ``workdir`` with this interpreter's Snakemake, and the environment it runs in (the tests'
    ir_datasets cache, this interpreter's bin directory first, as the rules call ``python``).

    ``--max-threads 1``: every job runs on one thread, so the two cores run two jobs at a time. The jobs that run a
    model are on one thread anyway (``MODEL_THREADS`` in workflow/rules/common.smk: a user's run computes what the
    tests' does); this caps the rest (PISA's index, the attention-scaling bench, spaCy's workers)."""
    env = {
        **os.environ,
        "IR_DATASETS_HOME": str(IR_DATASETS_HOME),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--cores", str(cores)]
    return [*cmd, "--max-threads", "1", *args], env


def snakemake(workdir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    cmd, env = snakemake_command(workdir, *args)
    done = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True)
    if check and done.returncode != 0:
        logs = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted((workdir / "results").rglob("*.log")))
        raise AssertionError(
            f"snakemake {' '.join(args)} failed:\n{done.stdout[-5000:]}\n{done.stderr[-5000:]}\n{logs}"
        )
    return done


# One Python process imports Snakemake once, then forks one child per dry run, two at a time: a process per dry run
# would pay that import every time. (The parse imports no model code: longrank.config.model_types.)
DRY_RUNNER = r"""
import json, os, sys

import snakemake.cli

pending, running, codes = json.loads(sys.argv[1]), {}, {}
while pending or running:
    while pending and len(running) < 2:
        key, cwd, argv, log_path = pending.pop(0)
        pid = os.fork()
        if pid == 0:
            os.chdir(cwd)
            log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(log, 1)
            os.dup2(log, 2)
            try:
                snakemake.cli.main(argv)
                code = 0
            except SystemExit as done:
                code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
            except BaseException:
                import traceback

                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        running[pid] = key
    pid, status = os.wait()
    codes[running.pop(pid)] = os.waitstatus_to_exitcode(status)
print(json.dumps(codes))
"""


class DryRun:
    """A dry run's exit status and what it printed (stdout and stderr together)."""

    def __init__(self, returncode: int, output: str):
        self.returncode, self.output = returncode, output

    def __repr__(self) -> str:  # keeps pytest's tracebacks to the message
        return f"DryRun(returncode={self.returncode})"


def dry_runs(jobs: dict[str, tuple[Path, list[str]]], logs: Path, env: dict | None = None) -> dict[str, DryRun]:
    """``snakemake -n`` for each ``key: (working directory, Snakemake's arguments)``, in one process that imports
    Snakemake and the models once (``DRY_RUNNER``); ``--nolock``, as two of them may read one working directory at
    once. Each run's output is kept under ``logs`` as ``<key>.log``. ``env``: the tests' workflow environment
    (``snakemake_command``'s) unless given."""
    logs.mkdir(parents=True, exist_ok=True)
    batch = [[key, str(cwd), ["-n", "--nolock", *argv], str(logs / f"{key}.log")] for key, (cwd, argv) in jobs.items()]
    done = subprocess.run(
        [sys.executable, "-c", DRY_RUNNER, json.dumps(batch)],
        cwd=logs,
        env=env or snakemake_command(logs)[1],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"the dry-run runner failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    codes = json.loads(done.stdout.strip().splitlines()[-1])
    return {key: DryRun(codes[key], (logs / f"{key}.log").read_text()) for key in jobs}


def snakemake_dry_runs(jobs: dict[str, tuple[Path, list[str]]], logs: Path) -> dict[str, DryRun]:
    """``dry_runs`` of the tests' workflow command (``snakemake_command``: this Snakefile, the working directory, its
    cores and threads) with each job's ``args``."""
    return dry_runs({key: (cwd, snakemake_command(cwd, *args)[0][3:]) for key, (cwd, args) in jobs.items()}, logs)


@pytest.fixture(scope="session")
def workflow_run(tmp_path_factory, ir_datasets_home) -> Path:
    """One run of the real DAG on Cranfield with tests/e2e_config.yaml, shared by every end-to-end test (the
    workflow's and the report's). Tests that change it work on a copy (``copy_workdir``)."""
    workdir = tmp_path_factory.mktemp("workflow")
    (workdir / "config").symlink_to(REPO / "config")  # `configfile:` resolves against the working directory
    snakemake(workdir, "report", "--configfile", str(E2E_CONFIG))
    return workdir


def write_local_collection(
    root: Path, docs: dict[str, str], queries: dict[str, str], qrels: list[tuple[str, str, int]]
) -> dict:
    """A small local collection in the adapter's formats; returns the config's dataset block."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "docs.jsonl").write_text("".join(json.dumps({"doc_id": d, "text": t}) + "\n" for d, t in docs.items()))
    (root / "queries.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in queries.items()))
    (root / "qrels.txt").write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in qrels))
    return {
        "name": "tiny",
        "source": "local",
        "docs": str(root / "docs.jsonl"),
        "queries": str(root / "queries.tsv"),
        "qrels": str(root / "qrels.txt"),
    }


TOPICS = [
    "wing lift airfoil",
    "heat transfer boundary",
    "shock wave supersonic",
    "plate buckling stress",
    "flutter vibration panel",
    "jet nozzle flow",
    "laminar turbulent transition",
    "rocket combustion chamber",
    "cone pressure hypersonic",
    "viscous drag body",
]


def synthetic_collection(n_queries: int = 20, docs_per_query: int = 6, seed: int = 0):
    """Documents about a topic relevant to the query that names it; others share no topic words."""
    import random

    rnd = random.Random(seed)
    filler = "the of and a study results method data analysis model experimental theoretical".split()
    docs, queries, qrels = {}, {}, []
    for q in range(n_queries):
        topic = TOPICS[q % len(TOPICS)].split()
        queries[f"q{q}"] = " ".join(topic) + f" case {q}"
        for j in range(docs_per_query):
            words = [rnd.choice(filler) for _ in range(40)]
            if j < 2:  # two relevant documents mention the topic several times
                for _ in range(5):
                    words.insert(rnd.randrange(len(words)), rnd.choice(topic))
                words.insert(rnd.randrange(len(words)), str(q))
                qrels.append((f"q{q}", f"d{q}_{j}", 1))
            else:
                words.insert(rnd.randrange(len(words)), rnd.choice(topic))
                qrels.append((f"q{q}", f"d{q}_{j}", 0))
            docs[f"d{q}_{j}"] = " ".join(words)
    return docs, queries, qrels


@pytest.fixture
def tiny_data(tmp_path):
    """A prepared synthetic collection (data stage output) with BM25 candidates."""
    from longrank.data.data import prepare
    from longrank.io.trec_files import write_run
    from longrank.retrieval.bm25 import bm25_run
    from longrank.data.corpus import Corpus

    docs, queries, qrels = synthetic_collection()
    dataset = write_local_collection(tmp_path / "src", docs, queries, qrels)
    prepare(dataset, {"method": "full"}, {"method": "holdout", "dev": 0.25, "test": 0.25}, tmp_path / "data")
    corpus = Corpus(tmp_path / "data")
    run = bm25_run(corpus.docs, corpus.queries, top_k=30)
    write_run(tmp_path / "bm25.run", run, "bm25")
    return tmp_path


# The modules that read the session's shared run (``workflow_run``). Under pytest-xdist they are one worker's unit of
# work together (``pytest_xdist_make_scheduler``), so the run is made once. The scheduler sees only test ids, so they
# are named here, and the collection fails where a module reads the fixture without being named.
SHARED_RUN_MODULES = {
    "tests/test_history.py",
    "tests/test_report.py",
    "tests/test_short_documents.py",
    "tests/test_workflow.py",
}


def _module(nodeid: str) -> str:
    return nodeid.split("::")[0]


# The time limit of an end-to-end test (pyproject.toml's timeout is for the rest): its setup may make a whole workflow
# run, the TREC DL rehearsal's 13 minutes under -n 2 on two cores, and this machine's pace varies twofold.
E2E_TIMEOUT_S = 3600


def pytest_collection_modifyitems(config, items):
    """End-to-end tests get E2E_TIMEOUT_S, unless marked with their own ``timeout``.

    The modules that run a workflow go first (a stable sort: each module keeps its order; it runs after
    pytest-randomly's shuffle): under pytest-xdist the longest work starts first and the quick modules fill the
    other worker meanwhile, so neither waits at the end."""
    for item in items:
        if item.get_closest_marker("e2e") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(E2E_TIMEOUT_S))
    readers = {_module(item.nodeid) for item in items if "workflow_run" in getattr(item, "fixturenames", ())}
    if not readers <= SHARED_RUN_MODULES:
        raise pytest.UsageError(
            f"tests/conftest.py: SHARED_RUN_MODULES lacks {sorted(readers - SHARED_RUN_MODULES)}, which read "
            "workflow_run: add them, or under pytest-xdist a second worker makes the shared run again"
        )
    runs_a_workflow = {_unit(item.nodeid) for item in items if item.get_closest_marker("e2e")}
    items.sort(key=lambda item: _unit(item.nodeid) not in runs_a_workflow)


def _unit(nodeid: str) -> str:
    """A test's unit of work under pytest-xdist: its module, or the shared run's modules together."""
    module = _module(nodeid)
    return "workflow_run" if module in SHARED_RUN_MODULES else module


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: without the plugin (no -n), pytest never calls it
def pytest_xdist_make_scheduler(config, log):
    """``pytest -n 2`` (``.ci/run``): each module is one worker's unit of work, so a module's shared run (a
    module-scoped fixture) is made once, and the modules that read the session's ``workflow_run`` are one unit
    together. The units go out in the collection's order (the workflow runs first), not xdist's default of the most
    tests first. (xdist's own ``--dist loadgroup`` marks do not group under pytest 9.2: pytest-xdist#1386.)"""
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    config.option.loadscopereorder = False
    return ByModule(config, log)


def resolved_for_report(config: dict) -> dict:
    """config.json's ``resolved_models`` of a hand-written config, as stage resolved_config writes it (the report's
    Inputs.resolved): each entry with its defaults, capabilities and effective settings."""
    from longrank.config.model_entries import effective_settings
    from longrank.resolved_config import resolved_models

    return resolved_models(config["models"], effective_settings(config))
