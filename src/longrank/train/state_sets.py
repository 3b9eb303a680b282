"""The resumable training state's checkpoint sets: their names, which exist, which verify, and a finished training's
set. Torch-free (the manifest's records are :mod:`longrank.results.file_records`'s), so that a stage that only checks sets,
``history``, starts without importing torch; writing and loading a set's tensors is :mod:`longrank.train.train_state`'s.

A set is one directory ``train_state/step-<step>/`` holding everything a resume needs, written together:
``last.safetensors`` (the weights after ``step``), ``optimizer.safetensors`` + ``optimizer.json`` (the optimiser's
moments flattened into tensors, its groups and the scheduler), ``position.json`` (the loop's position and the
fingerprint of what it trains on), ``best.safetensors`` + ``best_dev.run`` (the weights with the best dev score so
far and their dev run), and ``manifest.json``: each file's size and SHA-256. A set is written into a hidden
temporary directory and renamed into place only when complete, so a kill between two files leaves no set that
does not belong together. Loading verifies the newest set against its manifest; a set that fails is moved aside
(``*.corrupt-<time>``, with a warning) and the one before it is tried, and with none left training starts afresh.
The two newest sets are kept, so a corrupt one has a good one to fall back to.

A finished training keeps one set, reduced to what copying the model out again needs (``finish_state``): the best
weights, their dev run and the position, with a manifest marked ``finished``. Nothing resumes from it (its training
is over), but a rerun of the same training (``snakemake -R train``, a changed ``train.processes``) copies the model out
of it instead of training again. The weights, optimiser moments and the older set a resume needs are deleted: they
are most of the state (Adam keeps two moments per weight; MIR's rehearsal state was 889 MB, a full-scale run's
~20 GB) and no finished training reads them."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
from pathlib import Path

from longrank.results.file_records import check_records
from longrank.io.json_yaml import write_json
from longrank.train.position import PositionShapeError, TrainingPosition

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
BEST_FILES = ("best.safetensors", "best_dev.run")
KEEP_SETS = 2  # the newest and the one a corrupt newest falls back to
_SET_NAME = re.compile(r"^step-(\d+)$")


def set_name(step: int) -> str:
    return f"step-{step:09d}"


def sets_newest_first(state_dir: Path) -> list[Path]:
    """The complete (renamed into place) checkpoint sets, newest first; temporaries and sets moved aside are not."""
    if not state_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in state_dir.iterdir() if p.is_dir() and (m := _SET_NAME.match(p.name))]
    return [p for _, p in sorted(found, reverse=True)]


def set_problems(set_dir: Path) -> list[str]:
    """Why a set cannot be trusted (no or unreadable manifest, a file missing or changed); empty when it can."""
    try:
        records = json.loads((set_dir / MANIFEST).read_text())["files"]
        if not isinstance(records, dict) or "position.json" not in records:
            return [f"{MANIFEST} lists no position.json"]
        return check_records(set_dir, records)
    except FileNotFoundError:
        return [f"{MANIFEST} is missing"]
    except (ValueError, KeyError, TypeError) as err:
        return [f"{MANIFEST} is unreadable ({type(err).__name__}: {err})"]


def move_aside(set_dir: Path, problems: list[str]) -> Path:
    """Rename a set that failed verification out of the way (kept for inspection, never read again) and say so."""
    aside = set_dir.with_name(f"{set_dir.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
    set_dir.rename(aside)
    log.warning(
        "checkpoint set %s is corrupt (%s); moved aside to %s, not used", set_dir, "; ".join(problems), aside.name
    )
    return aside


def newest_good_set(state_dir: Path) -> Path | None:
    """The newest set that matches its manifest; each newer one that does not is moved aside on the way."""
    for set_dir in sets_newest_first(state_dir):
        problems = set_problems(set_dir)
        if not problems:
            return set_dir
        move_aside(set_dir, problems)
    return None


def is_finished(set_dir: Path) -> bool:
    """Whether the (verified) set is a finished training's: best weights and position only, nothing to resume."""
    return bool(json.loads((set_dir / MANIFEST).read_text()).get("finished"))


def finish_state(state_dir: Path) -> None:
    """Reduce a finished training's state to its newest set's best weights, dev run and position (the set's own
    records, so nothing is rehashed), marked finished; every older set goes. Safe to repeat after a kill: the
    manifest is replaced whole first, and the files it no longer lists are deleted after."""
    newest, *older = sets_newest_first(state_dir)
    for old in older:
        shutil.rmtree(old)
    manifest = json.loads((newest / MANIFEST).read_text())
    kept = {name: manifest["files"][name] for name in (*BEST_FILES, "position.json")}
    tmp = newest / f".{MANIFEST}.tmp"
    write_json(tmp, {"files": kept, "finished": True})
    fsync_file(tmp)
    tmp.replace(newest / MANIFEST)
    fsync_dir(newest)
    for path in newest.iterdir():
        if path.name not in kept and path.name != MANIFEST:
            path.unlink()


def kept_finished_sets(results: Path, model: str, fold_name: str) -> list[Path]:
    """Where finished trainings of ``model``'s fold ``fold_name`` are kept under ``results``: a results folder's
    ``models/<model>/<fold>/train_state`` and its history's entries (``history/<model>/<settings hash>/<fold>/``), and
    when ``results`` is the folder of results folders, each one's (another collection's: the other TREC DL year)."""
    patterns = (f"models/{model}/{fold_name}/train_state/step-*", f"history/{model}/*/{fold_name}/train_state/step-*")
    # a model's current state before its history's copies of it (the log names the folder it came from)
    return [found for pattern in patterns for prefix in ("", "*/") for found in sorted(results.glob(prefix + pattern))]


def find_finished_set(sets: list[Path], fingerprint: str) -> Path | None:
    """The first of ``sets`` that verifies, is finished and was made from exactly these inputs (``fingerprint``)."""
    for set_dir in sets:
        if set_problems(set_dir) or not is_finished(set_dir):
            continue
        try:
            if read_position(set_dir).fingerprint == fingerprint:
                return set_dir
        except PositionShapeError:
            continue
    return None


def read_position(set_dir: Path) -> TrainingPosition:
    """The set's position; one of another shape is a ``PositionShapeError`` naming the file."""
    path = set_dir / "position.json"
    return TrainingPosition.from_json(json.loads(path.read_text()), path)


def clear_state(state_dir: Path) -> None:
    """Remove every set and leftover temporary, keeping only sets moved aside as corrupt (the warning named them)."""
    if not state_dir.is_dir():
        return
    for path in state_dir.iterdir():
        if ".corrupt-" in path.name:
            continue
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def fsync_file(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def fsync_dir(path: Path) -> None:
    """The rename itself on disk (POSIX: a directory's entries are flushed through the directory)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
