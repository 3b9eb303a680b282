"""Provenance beside every run file: ``<run>.meta.yaml`` in the shape of ir_metadata (https://www.ir-metadata.org).

Every stage that writes a run under ``results/{dataset}/`` (``candidates/*.run``, ``runs/*.run``) calls
:func:`write_run_metadata` once after it, which writes, atomically like every other output:

- ``platform``: hardware (CPU model, cores, memory, the GPU where torch is loaded and sees one), operating system,
  software (Python and the versions of :data:`PACKAGES`);
- ``implementation``: the source, i.e. the git commit of the checkout the package runs from and whether its tracked
  files differ from it (``dirty``), or ``unknown`` outside a checkout (an installed wheel, no git);
- ``method``: the system's name and its resolved config entry (a model's entry, a first stage's spec, ...);
- ``run``: when it was created (UTC, ISO 8601), the stage's wall time in seconds (from the stage's process start
  unless the caller says when it started) and the run file's name.

The files are no declared Snakemake outputs: a stage rewrites its own beside the run it writes. The report's
provenance section reads the commit from one of them (:func:`read_run_metadata`). This module imports nothing
heavy (torch only if the stage already loaded it), so the report can use it.
"""

from __future__ import annotations

import datetime as dt
import functools
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import yaml

from longrank.io import write_text

SUFFIX = ".meta.yaml"
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
SOURCE = Path(__file__).resolve().parent  # the package's own directory: its checkout is what ran


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
        "software": {"python": platform.python_version(), "libraries": package_versions()},
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


def run_metadata(
    run_path: str | os.PathLike, entry: dict, started: float | None = None, name: str | None = None
) -> dict:
    now = time.time()
    started = process_started() if started is None else started
    run_path = Path(run_path)
    return {
        "platform": platform_section(),
        "implementation": {"source": {"repository": "longrank", **source()}},
        "method": {"name": name or run_path.name.removesuffix(".run"), "config": _plain(entry)},
        "run": {
            "file": run_path.name,
            "created": dt.datetime.fromtimestamp(now, dt.timezone.utc).isoformat(timespec="seconds"),
            "wall_time_s": round(max(0.0, now - started), 3),
        },
    }


def write_run_metadata(
    run_path: str | os.PathLike, entry: dict, started: float | None = None, name: str | None = None
) -> Path:
    """Write ``<run_path>.meta.yaml`` (atomically) for the run a stage just wrote; returns its path. ``entry``: the
    system's resolved config entry; ``started``: when the stage's work began (default: the process's start)."""
    path = metadata_path(run_path)
    write_text(path, yaml.safe_dump(run_metadata(run_path, entry, started, name), sort_keys=False, allow_unicode=True))
    return path


def read_run_metadata(run_path: str | os.PathLike) -> dict | None:
    """The metadata beside ``run_path``, or None where there is none (a run written before they existed)."""
    path = metadata_path(run_path)
    if not path.exists():
        return None
    return yaml.safe_load(path.read_text(encoding="utf-8"))
