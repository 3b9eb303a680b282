"""Results owned by one workflow: a lock on ``results/<dataset>`` itself, and a record of which config made it.

Snakemake locks and records its outputs in the working directory's ``.snakemake/``, not beside the outputs. Two
checkouts whose ``results/`` is one folder (a symlink, a shared file system) therefore neither see each other's lock
nor each other's records: one checkout's Snakemake counts the other's outputs "up to date" (it has no record of the
config that made them), and its report shows the other's models. So the workflow keeps two files in the results
directory of its collection:

- ``.longrank.lock`` while a workflow runs jobs there (taken in ``onstart``, so never by a dry run; released in
  ``onsuccess`` / ``onerror``): its pid, host, working directory and start time. A second workflow is refused,
  naming the first. A lock whose process is gone (same host, the pid dead or reused) is stale: taken over, with a
  warning, unless a training of the folder still runs (a ``kill -9`` of Snakemake leaves its jobs running): then
  the take is refused naming the training's state and process (``live_trainers``: the trainings' own locks, tried
  without waiting). A lock of another host cannot be checked: the message says which file to remove once nothing
  runs there.
- ``.longrank-owner.json``: the digest of the resolved config that last ran there and the working directories
  (each ``.snakemake/`` by an id it keeps) that ran with that config. When the workflow is parsed, dry runs
  included, a working directory that is not among them and brings another config is refused, naming the keys that
  differ: its Snakemake has no record of how those outputs were made, so it would call another config's outputs
  up to date. (The check runs before Snakemake's command-line settings reach the Snakefile, so ``--forceall`` cannot
  lift it: the message names the record to remove first.)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import socket
import time
import uuid
from pathlib import Path

from longrank.errors import InputError
from longrank.io.json_yaml import write_json
from longrank.processes import is_running, process_start
from longrank.results.trainer_lock import live_trainers

log = logging.getLogger(__name__)

LOCK = ".longrank.lock"
OWNER = ".longrank-owner.json"
#: the id of a working directory's Snakemake records (copied with ``.snakemake/``, as the records are)
CHECKOUT_ID = Path(".snakemake") / "longrank-checkout-id"
#: config keys naming input files: digested by the file they resolve to, not by their text (``data/docs.jsonl`` in
#: two working directories is two files)
FILE_KEYS = ("docs", "queries", "qrels", "train_queries", "train_qrels", "dev_queries", "dev_qrels")


def config_digest(config: dict, workdir: Path) -> str:
    """SHA-256 of the resolved config, its relative input paths resolved against ``workdir``."""
    return hashlib.sha256(
        json.dumps(_resolved_paths(config, workdir), sort_keys=True, default=str).encode()
    ).hexdigest()


def _resolved_paths(config: dict, workdir: Path) -> dict:
    config = json.loads(json.dumps(config, default=str))
    dataset = config.get("dataset")
    if isinstance(dataset, dict):
        for key in FILE_KEYS:
            if isinstance(dataset.get(key), str):
                dataset[key] = os.path.realpath(workdir / dataset[key])
    for spec in (config.get("first_stages") or {}).values():
        if isinstance(spec, dict) and isinstance(spec.get("path"), str):
            spec["path"] = os.path.realpath(workdir / spec["path"])
    return config


def checkout_id(workdir: Path, create: bool = False) -> str | None:
    """The id of ``workdir``'s Snakemake records (``.snakemake/longrank-checkout-id``), made when ``create``."""
    path = workdir / CHECKOUT_ID
    with contextlib.suppress(OSError):
        return path.read_text().strip() or None
    if not create:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(uuid.uuid4().hex + "\n")
    return path.read_text().strip()


def _read(path: Path) -> dict | None:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def check_owner(results: Path, workdir: Path, config: dict) -> None:
    """Refuse (an InputError) a working directory that did not run on ``results`` and brings another config than
    the one that last ran there. Reads only: run when the workflow is parsed, dry runs included."""
    owner = _read(results / OWNER)
    if owner is None:
        return
    if owner.get("config_digest") == config_digest(config, workdir):
        return
    if checkout_id(workdir) in owner.get("checkouts", []):
        return  # this working directory's Snakemake recorded how it made them: its params triggers judge the change
    changed = _differences(owner.get("config") or {}, _resolved_paths(config, workdir))
    if _same_directory(owner.get("workdir"), workdir):
        raise InputError(_own_records_gone_message(results, workdir, changed))
    raise InputError(
        f"{_where(results)} holds the outputs of another config, run from {owner.get('workdir', '?')}"
        + (f" (keys that differ: {', '.join(changed[:8])}{' ...' if len(changed) > 8 else ''})" if changed else "")
        + f"; this working directory ({workdir}) has no record of how they were made, so Snakemake would count them "
        "up to date. Give this config its own results folder (another dataset.name, or a results/ that is not shared), "
        f"run from {owner.get('workdir', 'that working directory')}, or remove {results / OWNER} and rebuild them all "
        "here with --forceall"
    )


def _same_directory(recorded, workdir: Path) -> bool:
    """Whether the owner record's working directory is ``workdir`` (links resolved): the record is this one's own,
    whatever became of its ``.snakemake/``."""
    return isinstance(recorded, str) and os.path.realpath(recorded) == os.path.realpath(workdir)


def _own_records_gone_message(results: Path, workdir: Path, changed: list[str]) -> str:
    """This working directory made the outputs with another config and its Snakemake records (``.snakemake/``,
    where the checkout id lives) are gone: Snakemake has no record of the old config, so it would count the outputs
    up to date. Refused as before, saying whose they are."""
    return (
        f"{_where(results)} holds the outputs of another config, made from this working directory ({workdir})"
        + (f" (keys that differ: {', '.join(changed[:8])}{' ...' if len(changed) > 8 else ''})" if changed else "")
        + "; its Snakemake records of how they were made (.snakemake/) are gone, so Snakemake would count them up to "
        f"date. Run with the config that made them, or remove {results / OWNER} and rebuild them with --forceall"
    )


@contextlib.contextmanager
def path_errors(results: Path):
    """An OS error on the results folder, its lock or its owner record (a dangling ``results`` link, no
    permission, a file where a folder belongs) as an InputError naming the path and what is wrong."""
    try:
        yield
    except OSError as err:
        raise InputError(_path_problem(results, err)) from None


def _path_problem(results: Path, err: OSError) -> str:
    dangling = next((p for p in (results, *results.parents) if p.is_symlink() and not p.exists()), None)
    if dangling is not None:
        return (
            f"{dangling} is a link to {os.readlink(dangling)}, which does not exist, so the results folder {results} "
            "cannot be made there: create the folder it points to, or remove the link"
        )
    return f"{err.filename or results}: {err.strerror or err} (the results folder {results}, its lock and owner record)"


def _differences(old, new, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two configs."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [
            d
            for key in sorted(set(old) | set(new))
            for d in _differences(old.get(key), new.get(key), f"{prefix}{key}.")
        ]
    return [] if old == new else [prefix.rstrip(".")]


def _alive(holder: dict) -> bool:
    return is_running(holder.get("pid"), holder.get("pid_started"))


def acquire(results: Path, workdir: Path, config: dict) -> None:
    """Take ``results``' lock for this process, or raise an InputError naming the workflow that holds it; then record
    this working directory and config as the results' owner."""
    results.mkdir(parents=True, exist_ok=True)
    lock = results / LOCK
    host = socket.gethostname()
    me = {
        "pid": os.getpid(),
        "pid_started": process_start(os.getpid()),
        "host": host,
        "workdir": str(workdir),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if not lock.exists():
        _refuse_live_trainers(results)
    for _ in range(3):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            holder = _read(lock)
            if holder is None and time.time() - _mtime(lock) < 10:
                time.sleep(1)  # being written by the workflow that just took it
                continue
            holder = holder or {}
            if holder.get("pid") == me["pid"] and holder.get("host") == me["host"]:
                break  # ours already
            if holder.get("host") == me["host"] and not _alive(holder):
                _refuse_live_trainers(results)
                log.warning(
                    "removing a stale lock %s of process %s, which is no longer running", lock, holder.get("pid")
                )
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(lock)
                continue
            raise InputError(_held_message(lock, holder, host)) from None
        with os.fdopen(fd, "w") as f:
            json.dump(me, f)
        break
    else:
        raise InputError(_held_message(lock, _read(lock) or {}, host))
    _record_owner(results, workdir, config)


def _refuse_live_trainers(results: Path) -> None:
    """An InputError naming the trainings a running process trains in ``results`` (left by a killed workflow: a new
    one would start a second trainer on their state), if any."""
    running = live_trainers(results)
    if running:
        named = "; ".join(
            f"{state} (process {who.get('pid', '?')}, since {who.get('started', '?')})" for state, who in running
        )
        raise InputError(
            f"{_where(results)}: a training of this folder still runs, left by a workflow that was killed: {named}. "
            "A new workflow would start a second trainer on its state; wait for it to end or stop it (kill the "
            "process: it keeps its last checkpoint, which the next run resumes), then run again"
        )


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _held_message(lock: Path, holder: dict, host: str) -> str:
    who = (
        f"the workflow run from {holder.get('workdir', '?')} (process {holder.get('pid', '?')} on "
        f"{holder.get('host', '?')}, since {holder.get('started', '?')})"
    )
    remedy = (
        "wait for it to finish"
        if holder.get("host") == host
        else f"wait for it to finish; if nothing runs there any more, remove {lock}"
    )
    return (
        f"{_where(lock.parent)} is locked by {who}: two workflows writing one results folder would mix their outputs; "
        f"{remedy} (or give this one its own results folder)"
    )


def _where(results: Path) -> str:
    """``results`` and, when a link makes it another folder, the folder it is."""
    real = results.resolve()
    return f"{results} ({real})" if real != results.absolute() else str(results)


def _record_owner(results: Path, workdir: Path, config: dict) -> None:
    owner = _read(results / OWNER) or {}
    digest = config_digest(config, workdir)
    me = checkout_id(workdir, create=True)
    checkouts = owner.get("checkouts", []) if owner.get("config_digest") == digest else []
    write_json(
        results / OWNER,
        {
            "config_digest": digest,
            "workdir": str(workdir),
            "checkouts": [*[c for c in checkouts if c != me], me],
            "config": _resolved_paths(config, workdir),
        },
    )


def release(results: Path) -> None:
    """Remove ``results``' lock if this process holds it."""
    lock = results / LOCK
    holder = _read(lock) or {}
    if holder.get("pid") == os.getpid() and holder.get("host") == socket.gethostname():
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)
