"""Provenance beside every run file: ``<run>.meta.yaml``, an ir_metadata record (https://www.ir-metadata.org,
schema version 0.1) of the run it sits beside.

Every stage that writes a run under ``results/{dataset}/`` (``candidates/*.run``, ``runs/*.run``) and ``longrank
rerank`` call :func:`write_run_metadata` once after the run, which writes, atomically like every other output:

- ``schema-version`` and ``tag`` (the run's tag: the system's name, as in the run file's sixth column);
- ``platform``: hardware (CPU model, cores, memory, the GPU where torch is loaded and sees one), operating system,
  software (Python and the versions of :data:`PACKAGES`);
- ``implementation``: the source, i.e. the repository (its ``origin`` URL where the checkout has one), the git
  commit of the checkout the package runs from and whether its tracked files differ from it (``dirty``), or
  ``unknown`` outside a checkout (an installed wheel, no git);
- ``data``: the collection, topics and qrels the run was made from, each with its file's SHA-256, and which queries
  trained, chose (dev) and tested, per fold;
- ``method``: the system's name, its resolved config entry, the pipeline (``retrieves`` from the collection,
  ``reranks`` a first stage, ``interpolates`` a model's run with a first stage) and, for a trained model, its training
  per fold (steps run, best step and dev nDCG@10, seed, the weights' SHA-256);
- ``run``: when it was created (UTC, ISO 8601), the stage's wall time in seconds (from the stage's process start
  unless the caller says when it started) and the run file's name.

A side file rather than ir_metadata's other form, a ``# ir_metadata.start`` comment header inside the run: trec_eval
and most run readers refuse comment lines, and every run here stays a plain six-column TREC run. The files are no
declared Snakemake outputs: a stage rewrites its own beside the run it writes. The report's provenance section reads
the commit from one of them (:func:`read_run_metadata`). This module imports nothing heavy (torch only if the stage
already loaded it), so the report can use it.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import importlib.metadata
import contextlib
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from longrank.io.atomic import write_text
from longrank.io.json_yaml import load_yaml

SUFFIX = ".meta.yaml"
SCHEMA_VERSION = "0.1"  # ir_metadata's
UNKNOWN = "unknown"
PACKAGES = [
    "longrank",
    "torch",
    "transformers",
    "safetensors",
    "bm25s",
    "pyterrier_pisa",
    "ir_datasets",
    "ir_measures",
    "pytrec_eval_terrier",
    "snakemake",
    "gensim",
    "scikit-learn",
    "scipy",
    "statsmodels",
    "numpy",
    "pandas",
    "matplotlib",
]
SOURCE = Path(__file__).resolve().parents[1]  # the package's own directory: its checkout is what ran


def metadata_path(run_path: str | os.PathLike) -> Path:
    """``runs/tk.run`` -> ``runs/tk.run.meta.yaml``."""
    run_path = Path(run_path)
    return run_path.with_name(run_path.name + SUFFIX)


def package_versions() -> dict[str, str]:
    versions = {}
    for pkg in PACKAGES:
        try:
            versions[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            versions[pkg] = "not installed"
    return versions


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(SOURCE), *args], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


@functools.lru_cache(maxsize=1)
def repository() -> str:
    """The checkout's ``origin`` URL, or the project's name where it has none (a copy, an installed wheel)."""
    url = _git("remote", "get-url", "origin")
    return url.strip() if url and url.strip() else "longrank"


@functools.lru_cache(maxsize=1)
def source() -> dict:
    """``{commit, dirty}`` of the git checkout the package runs from (dirty: a tracked file differs from the
    commit; untracked files are not counted), or ``{commit: unknown, dirty: unknown}`` outside one."""
    commit = _git("rev-parse", "HEAD")
    if not commit:
        return {"commit": UNKNOWN, "dirty": UNKNOWN}
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit.strip(), "dirty": UNKNOWN if status is None else bool(status.strip())}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or UNKNOWN


def memory_bytes() -> int | str:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return UNKNOWN


def gpus() -> list[str]:
    """The CUDA devices torch sees, only where the stage already imported torch (importing it here would cost the
    stages that never use it seconds)."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available():
            return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception:  # noqa: BLE001 - provenance must never fail a stage
        pass
    return []


def deterministic_algorithms() -> dict:
    """Whether this stage computed with PyTorch's deterministic algorithms (the config's ``deterministic``), where it
    loaded torch at all."""
    torch = sys.modules.get("torch")
    return {} if torch is None else {"deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled())}


def platform_section() -> dict:
    return {
        "hardware": {
            "cpu": {"model": cpu_model(), "cores": os.cpu_count()},
            "memory_bytes": memory_bytes(),
            "gpu": gpus(),
        },
        "operating_system": {
            "kernel": platform.release(),
            "system": platform.system(),
            "platform": platform.platform(),
        },
        "software": {
            "python": platform.python_version(),
            "libraries": package_versions(),
            **deterministic_algorithms(),
        },
    }


def process_started() -> float:
    """When this process started (seconds since the epoch): a stage is one ``python -m longrank <stage>``."""
    try:
        import psutil

        return psutil.Process().create_time()
    except Exception:  # noqa: BLE001 - no psutil: the module's import is the closest mark
        return _IMPORTED


_IMPORTED = time.time()


def _plain(value):
    """The entry as plain YAML types (JSON's: tuples become lists, anything else its string)."""
    return json.loads(json.dumps(value, default=str))


def file_sha256(path: str | os.PathLike) -> str:
    """A file's SHA-256, remembered beside it in ``.sha256.json`` by size and modification time: a collection's
    documents are hashed once, not once per run written from them."""
    path = Path(path)
    stat = path.stat()
    cache_path = path.parent / ".sha256.json"
    try:
        cache = json.loads(cache_path.read_text())
    except (OSError, ValueError):
        cache = {}
    key = f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}"
    if key not in cache:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        cache = {k: v for k, v in cache.items() if not k.startswith(f"{path.name}:")} | {key: digest.hexdigest()}
        with contextlib.suppress(OSError):  # a read-only data directory: hashed again next time
            write_text(cache_path, json.dumps(cache, indent=1, sort_keys=True))
    return cache[key]


def data_section(data_dir: str | os.PathLike | None) -> dict:
    """The collection, topics and qrels a run was made from (the data stage's files, with their SHA-256), and which
    queries trained, chose and tested per fold (folds.json)."""
    if data_dir is None:
        return {}
    data_dir = Path(data_dir)
    try:
        stats = json.loads((data_dir / "stats.json").read_text())
        folds = json.loads((data_dir / "folds.json").read_text())
    except (OSError, ValueError):
        stats, folds = {}, []
    files = {"collection": "docs.jsonl", "topics": "queries.tsv", "qrels": "qrels.txt"}
    section: dict[str, Any] = {
        role: {"file": name, "sha256": file_sha256(data_dir / name)}
        for role, name in files.items()
        if (data_dir / name).is_file()
    }
    section["collection"] = {
        "name": data_dir.parent.name,
        "documents": stats.get("num_docs"),
        **section.get("collection", {}),
    }
    section["topics"] = {"queries": stats.get("num_queries"), **section.get("topics", {})}
    section["split"] = [
        {"fold": index, **{part: query_set(fold.get(part, [])) for part in ("train", "dev", "test")}}
        for index, fold in enumerate(folds)
    ]
    return section


def files_section(files: dict[str, str | os.PathLike]) -> dict:
    """The data of a run made outside the workflow (``longrank rerank --ranker``): each role's file and SHA-256."""
    return {role: {"file": str(path), "sha256": file_sha256(path)} for role, path in files.items()}


#: a query set of at most this many ids is listed whole; a larger one (MS MARCO's 367k training queries) by count
#: and digest
LISTED_QUERIES = 1000


def query_set(ids: list[str]) -> dict:
    """A fold's query set: how many, the SHA-256 of its sorted ids (one a line), and the ids where they are few."""
    ids = sorted(ids)
    digest = hashlib.sha256("".join(f"{q}\n" for q in ids).encode()).hexdigest()
    return {"count": len(ids), "sha256": digest, **({"ids": ids} if len(ids) <= LISTED_QUERIES else {})}


def training_section(checkpoints: list[str | os.PathLike]) -> list[dict]:
    """Per fold, what trained the weights a run was scored with: train_summary.json and the weights' manifest."""
    folds: list[dict[str, Any]] = []
    for checkpoint in checkpoints:
        folder = Path(checkpoint).parent
        try:
            summary = json.loads((folder / "train_summary.json").read_text())
            manifest = json.loads((folder / "model.manifest.json").read_text())
        except (OSError, ValueError):
            folds.append({"weights": str(checkpoint), "summary": UNKNOWN})
            continue
        folds.append(
            {
                "fold": summary.get("fold"),
                "steps_run": summary.get("steps_run"),
                "best_step": summary.get("best_step"),
                "best_dev_ndcg10": summary.get("best_dev_ndcg10"),
                "seed": (summary.get("hyperparameters") or {}).get("seed"),
                "seconds": summary.get("seconds"),
                "device": summary.get("device"),
                "deterministic": bool(summary.get("deterministic")),  # absent: a summary from before the key, off
                "weights_sha256": manifest.get("files", {}).get(Path(checkpoint).name, {}).get("sha256", UNKNOWN),
            }
        )
    return folds


def run_metadata(
    run_path: str | os.PathLike,
    entry: dict,
    started: float | None = None,
    name: str | None = None,
    data_dir: str | os.PathLike | None = None,
    pipeline: dict | None = None,
    checkpoints: Sequence[str | os.PathLike] = (),
    data_files: dict[str, str | os.PathLike] | None = None,
) -> dict:
    """The ir_metadata record of one run (module docstring). ``pipeline``: ``{"reranks": first stage}``,
    ``{"retrieves": "collection"}`` or ``{"interpolates": [run, first stage]}``; ``checkpoints``: the weights it was
    scored with, one per fold (a trained model's run)."""
    now = time.time()
    started = process_started() if started is None else started
    run_path = Path(run_path)
    tag = name or run_path.name.removesuffix(".run")
    method: dict[str, Any] = {"name": tag, "config": _plain(entry), "pipeline": _plain(pipeline or {})}
    if checkpoints:
        method["training"] = training_section(list(checkpoints))
    return {
        "schema-version": SCHEMA_VERSION,
        "tag": tag,
        "platform": platform_section(),
        "implementation": {
            "source": {"repository": repository(), **source()},
            "lang": {"python": platform.python_version()},
        },
        "data": data_section(data_dir) if data_files is None else files_section(data_files),
        "method": method,
        "run": {
            "file": run_path.name,
            "created": dt.datetime.fromtimestamp(now, dt.UTC).isoformat(timespec="seconds"),
            "wall_time_s": round(max(0.0, now - started), 3),
        },
    }


def write_run_metadata(run_path: str | os.PathLike, entry: dict, started: float | None = None, **record) -> Path:
    """Write ``<run_path>.meta.yaml`` (atomically) for the run a stage just wrote; returns its path. ``entry``: the
    system's resolved config entry; ``started``: when the stage's work began (default: the process's start);
    ``record``: :func:`run_metadata`'s name, data_dir, pipeline, checkpoints and data_files."""
    path = metadata_path(run_path)
    meta = run_metadata(run_path, entry, started, **record)
    write_text(path, yaml.safe_dump(meta, sort_keys=False, allow_unicode=True))
    return path


def read_run_metadata(run_path: str | os.PathLike) -> dict | None:
    """The metadata beside ``run_path``, or None where there is none (a run written before they existed)."""
    path = metadata_path(run_path)
    if not path.exists():
        return None
    return load_yaml(path.read_text(encoding="utf-8"))
