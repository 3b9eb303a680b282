"""Provenance beside every run file: ``<run>.meta.yaml``, an ir_metadata record (https://www.ir-metadata.org,
schema version 0.1) of the run it sits beside, in the spec's keys and sections (checked against
``ir_metadata.schema.json``, the spec's checklists transcribed).

Every stage that writes a run under ``results/{dataset}/`` (``candidates/*.run``, ``runs/*.run``) and ``longrank
rerank`` call :func:`write_run_metadata` once after the run, which writes, atomically like every other output:

- ``schema-version``, ``run-version`` (of this record's layout) and ``tag`` (the run file's sixth column);
- ``platform``: ``hardware`` (cpu ``model``, ``architecture``, ``operation mode``, ``number of cores``; ``ram`` as
  "N GB"; the ``gpu`` where torch is loaded and sees one), ``operating system`` (``kernel``, ``distribution``),
  ``software`` (``libraries: {python: [name==version, ...]}`` of :data:`PACKAGES`, torch with its build, and the
  ``retrieval toolkit`` among them);
- ``implementation``: ``executable: cmd`` (the command that made the run: ``python -m longrank <stage> ...``) and
  ``source`` (``lang: [python]``, the ``repository``'s ``origin`` URL where the checkout has one, the git
  ``commit`` the package runs from, or ``unknown`` outside a checkout);
- ``data``: the ``test collection`` (name; its ir_datasets page and id, or its local files), a trained model's
  ``training data`` (an exported model's from the export's own ``ranker.json``) and ``other`` (the pre-trained
  embeddings or encoder it started from) (:mod:`longrank.results.run_metadata_data`);
- ``method``: ``automatic``, ``score ties`` and ``retrieval``, one mapping per pipeline component, the stages before
  this one read from their own runs' records (:mod:`longrank.results.run_metadata_method`);
- ``longrank``: what the spec has no key for: the Python version, memory in bytes, the GPUs seen, whether the
  deterministic algorithms were on, whether the checkout's tracked files differed from the commit (``dirty``), each
  data file's SHA-256, the per-fold query split, what trained the weights per fold (steps, best dev nDCG@10, seed,
  the weights' SHA-256), and the run's file, creation time (UTC, ISO 8601) and the stage's wall time in seconds
  (from the stage's process start unless the caller says when it started).

A side file rather than ir_metadata's other form, a ``# ir_metadata.start`` comment header inside the run: trec_eval
and most run readers refuse comment lines, and every run here stays a plain six-column TREC run; ``longrank
annotate_run`` writes the annotated form of one on request (:mod:`longrank.results.annotate_run`). The files are no
declared Snakemake outputs: a stage rewrites its own beside the run it writes. The report's provenance section reads
the commit from one of them (:func:`read_run_metadata`). This module imports nothing heavy (torch only if the stage
already loaded it), so the report can use it.
"""

from __future__ import annotations

import datetime as dt
import functools
import importlib.metadata
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from longrank import invocation
from longrank.io.atomic import write_text
from longrank.io.json_yaml import load_yaml
from longrank.results.run_metadata_data import file_sha256, given_files_data, workflow_data
from longrank.results.run_metadata_method import TIES_BY_FIRST_STAGE, TIES_BY_ID, method_section, plain
from longrank.results.run_metadata_method import training_section

__all__ = ["TIES_BY_FIRST_STAGE", "TIES_BY_ID", "file_sha256", "read_run_metadata", "write_run_metadata"]

SUFFIX = ".meta.yaml"
SCHEMA_VERSION = "0.1"  # ir_metadata's
#: this record's own layout: 2.0 since it follows the spec's keys (1.0: LongRank's own keys in the spec's sections)
RUN_VERSION = "2.0"
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
#: the retrieval toolkits among them (the spec's ``retrieval toolkit``): LongRank's first stages run on these
RETRIEVAL_TOOLKITS = ["bm25s", "pyterrier_pisa"]
#: ir_metadata v0.1's checklists transcribed as a JSON Schema (:func:`schema_errors`)
SCHEMA = Path(__file__).with_name("ir_metadata.schema.json")
SOURCE = Path(__file__).resolve().parents[1]  # the package's own directory: its checkout is what ran


def metadata_path(run_path: str | os.PathLike) -> Path:
    """``runs/tk.run`` -> ``runs/tk.run.meta.yaml``."""
    run_path = Path(run_path)
    return run_path.with_name(run_path.name + SUFFIX)


def package_versions() -> dict[str, str]:
    """Each of :data:`PACKAGES` -> its version; torch's with its build (``2.13.0+cpu``, ``+cu130``): the loaded
    module's own where the stage imported it, else the installed distribution's (which carries the build too)."""
    versions = {}
    for pkg in PACKAGES:
        try:
            versions[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            versions[pkg] = "not installed"
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(getattr(torch, "__version__", None), str):
        versions["torch"] = str(torch.__version__)
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


def command() -> str:
    """The command that made the run: ``python -m longrank <stage> <arguments>`` as longrank.cli received them, or
    the process's own command line where a stage was called in-process (a test, a notebook)."""
    if invocation.argv is not None:
        return shlex.join(["python", "-m", "longrank", *invocation.argv])
    return shlex.join(["python", *sys.argv]) if sys.argv and sys.argv[0].endswith(".py") else shlex.join(sys.argv)


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


def gigabytes(n: int | str) -> str:
    """The spec's "N GB" (decimal gigabytes, one place: 16 GiB is "17.2 GB")."""
    return f"{n / 1e9:.1f} GB" if isinstance(n, int) else UNKNOWN


def gpus() -> list[dict]:
    """The CUDA devices torch sees (name, compute capability, memory), only where the stage already imported torch
    (importing it here would cost the stages that never use it seconds)."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available():
            props = [torch.cuda.get_device_properties(i) for i in range(torch.cuda.device_count())]
            return [{"name": p.name, "capability": f"sm_{p.major}{p.minor}", "bytes": p.total_memory} for p in props]
    except Exception:  # noqa: BLE001 - provenance must never fail a stage
        pass
    return []


def distribution() -> str:
    try:
        return platform.freedesktop_os_release().get("PRETTY_NAME", UNKNOWN)
    except OSError:  # no /etc/os-release: macOS, a bare container
        return f"{platform.system()} {platform.version()}".strip() or UNKNOWN


def platform_section(devices: list[dict], versions: dict[str, str]) -> dict:
    """The spec's ``platform``: the hardware (the first GPU's facts under ``gpu``, all of them under ``longrank``),
    the operating system and the libraries, as ``name==version`` (the uninstalled ones only under ``longrank``)."""
    ram = memory_bytes()
    hardware: dict[str, Any] = {
        "cpu": {
            "model": cpu_model(),
            "architecture": platform.machine() or UNKNOWN,
            "operation mode": f"{platform.architecture()[0].removesuffix('bit')}-bit",
            "number of cores": os.cpu_count(),
        },
        "ram": gigabytes(ram),
    }
    if devices:
        first = devices[0]
        hardware["gpu"] = {
            "model": first["name"],
            "architecture": first["capability"],
            "ram": gigabytes(first["bytes"]),
        }
    installed = {name: v for name, v in versions.items() if v != "not installed"}
    return {
        "hardware": hardware,
        "operating system": {"kernel": f"{platform.system()} {platform.release()}", "distribution": distribution()},
        "software": {
            "libraries": {"python": [f"{name}=={v}" for name, v in installed.items()]},
            "retrieval toolkit": [f"{name}=={installed[name]}" for name in RETRIEVAL_TOOLKITS if name in installed],
        },
    }


def platform_extras(devices: list[dict], versions: dict[str, str]) -> dict:
    """Facts of the platform the spec has no key for."""
    torch = sys.modules.get("torch")
    return {
        "python": platform.python_version(),
        "system": platform.platform(),
        "memory_bytes": memory_bytes(),
        "gpus": [{"name": d["name"], "architecture": d["capability"], "memory_bytes": d["bytes"]} for d in devices],
        "not_installed": [name for name, v in versions.items() if v == "not installed"],
        # whether this stage computed with PyTorch's deterministic algorithms (the config's ``deterministic``), where
        # it loaded torch at all
        **({} if torch is None else {"deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled())}),
    }


def process_started() -> float:
    """When this process started (seconds since the epoch): a stage is one ``python -m longrank <stage>``."""
    try:
        import psutil

        return psutil.Process().create_time()
    except Exception:  # noqa: BLE001 - no psutil: the module's import is the closest mark
        return _IMPORTED


_IMPORTED = time.time()


def run_metadata(
    run_path: str | os.PathLike,
    entry: dict,
    started: float | None = None,
    name: str | None = None,
    data_dir: str | os.PathLike | None = None,
    pipeline: dict | None = None,
    checkpoints: Sequence[str | os.PathLike] = (),
    data_files: dict[str, str | os.PathLike] | None = None,
    upstream: Sequence[str | os.PathLike] = (),
    score_ties: str | None = None,
) -> dict:
    """The ir_metadata record of one run (module docstring). ``pipeline``: ``{"retrieves": method}``, ``{"reranks":
    first stage, "depth": n}`` (with ``"interpolation_weight"`` where the same stage interpolates) or
    ``{"interpolates": [run, first stage]}``; ``upstream``: the runs it reranks or interpolates, whose records give the
    pipeline's earlier components; ``checkpoints``: the weights it was scored with, one per fold (a trained model's
    run); ``score_ties``: how its equal scores are ordered where not as ``pipeline`` implies."""
    now = time.time()
    started = process_started() if started is None else started
    run_path = Path(run_path)
    tag = name or run_path.name.removesuffix(".run")
    entry = plain(entry)
    if data_files is not None:  # a run made outside the workflow: the export's folder is the checkpoint's
        data, data_extras = given_files_data(data_files, [Path(c).parent for c in checkpoints])
    elif data_dir is not None:
        data, data_extras = workflow_data(Path(data_dir), entry, bool(checkpoints))
    else:
        data, data_extras = {}, {}
    devices, versions = gpus(), package_versions()
    src = source()
    return {
        "schema-version": SCHEMA_VERSION,
        "run-version": RUN_VERSION,
        "tag": tag,
        "platform": platform_section(devices, versions),
        "implementation": {
            "executable": {"cmd": command()},
            "source": {"lang": ["python"], "repository": repository(), "commit": src["commit"]},
        },
        "data": data,
        "method": method_section(tag, entry, plain(pipeline or {}), upstream, score_ties),
        "longrank": {
            "platform": platform_extras(devices, versions),
            "implementation": {"dirty": src["dirty"]},
            "data": data_extras,
            "method": {"training": training_section(list(checkpoints))} if checkpoints else {},
            "run": {
                "file": run_path.name,
                "created": dt.datetime.fromtimestamp(now, dt.UTC).isoformat(timespec="seconds"),
                "wall_time_s": round(max(0.0, now - started), 3),
            },
        },
    }


def write_run_metadata(run_path: str | os.PathLike, entry: dict, started: float | None = None, **record) -> Path:
    """Write ``<run_path>.meta.yaml`` (atomically) for the run a stage just wrote; returns its path. ``entry``: the
    system's resolved config entry; ``started``: when the stage's work began (default: the process's start);
    ``record``: :func:`run_metadata`'s other arguments."""
    path = metadata_path(run_path)
    meta = run_metadata(run_path, entry, started, **record)
    # no wrapping: the command line (and a long path) stays one line to read and to copy
    write_text(path, yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=math.inf))
    return path


def schema_errors(record: dict) -> list[str]:
    """Where a record breaks ir_metadata v0.1's checklists (:data:`SCHEMA`), one line each; none: it conforms."""
    from jsonschema import Draft202012Validator  # only the checks need it, not every stage that writes a record

    validator = Draft202012Validator(json.loads(SCHEMA.read_text(encoding="utf-8")))
    errors = sorted(validator.iter_errors(record), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in errors]


def read_run_metadata(run_path: str | os.PathLike) -> dict | None:
    """The metadata beside ``run_path``, or None where there is none (a run written before they existed)."""
    path = metadata_path(run_path)
    if not path.exists():
        return None
    return load_yaml(path.read_text(encoding="utf-8"))
