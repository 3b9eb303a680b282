"""The resumable training state as safetensors (never pickle), in checkpoint sets that verify themselves.

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
~20 GB) and no finished training reads them.

Model weights themselves (and loading a trained model) are :mod:`longrank.models.checkpoint`'s."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from longrank.io import write_json
from longrank.models.checkpoint import check_records, file_record, load_weights, save_weights, write_manifest
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
    _fsync_file(tmp)
    tmp.replace(newest / MANIFEST)
    _fsync_dir(newest)
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


def save_training_state(
    state_dir: Path,
    model,
    optimizer,
    scheduler,
    position: TrainingPosition,
    write_best_run: Callable[[Path], None] | None = None,
) -> Path:
    """Write a new checkpoint set for ``position.step`` and return it. ``write_best_run`` (writes the dev run to a
    path) means this step's weights are the best so far; otherwise the previous set's best weights and run are
    carried over, checked against that set's manifest so that a corruption is never copied forward."""
    state_dir.mkdir(parents=True, exist_ok=True)
    previous = next(iter(sets_newest_first(state_dir)), None)
    final = state_dir / set_name(position.step)
    for leftover in state_dir.glob(".partial-*"):  # a set a killed run was writing: never complete, never read
        shutil.rmtree(leftover, ignore_errors=True)
    tmp = state_dir / f".partial-{final.name}-{os.getpid()}"
    tmp.mkdir()
    try:
        records = _write_set(tmp, model, optimizer, scheduler, position, write_best_run, previous)
        write_json(tmp / MANIFEST, {"files": records})
        _fsync_file(tmp / MANIFEST)
        if final.exists():  # the same step written again (a resume after its set was moved aside): the new one wins
            shutil.rmtree(final)
        tmp.rename(final)
        _fsync_dir(state_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for old in sets_newest_first(state_dir)[KEEP_SETS:]:
        shutil.rmtree(old)
    return final


def _write_set(
    directory: Path, model, optimizer, scheduler, position: TrainingPosition, write_best_run, previous: Path | None
) -> dict:
    """The set's files in ``directory``, each flushed to disk; returns their manifest records."""
    save_weights(model, directory / "last.safetensors", manifest=False)
    tensors, meta = {}, {"param_groups": optimizer.state_dict()["param_groups"], "state_keys": {}}
    for param_id, state in optimizer.state_dict()["state"].items():
        meta["state_keys"][str(param_id)] = sorted(state)
        for key, value in state.items():
            tensors[f"{param_id}.{key}"] = torch.as_tensor(value).detach().cpu().contiguous()
    save_file(tensors, str(directory / "optimizer.safetensors"))
    meta["scheduler"] = scheduler.state_dict() if scheduler is not None else None
    write_json(directory / "optimizer.json", meta)
    write_json(directory / "position.json", position.to_json())
    carried = {}
    if write_best_run is not None:
        shutil.copyfile(directory / "last.safetensors", directory / "best.safetensors")
        write_best_run(directory / "best_dev.run")
    elif previous is not None:
        carried = _carry_best(previous, directory)
    for name in os.listdir(directory):
        _fsync_file(directory / name)
    records = {name: file_record(directory / name) for name in sorted(os.listdir(directory))}
    if any(records[name] != record for name, record in carried.items()):
        raise RuntimeError(
            f"copying the best weights of {previous} into a new checkpoint set changed them; check the disk"
        )
    return records


def _carry_best(previous: Path, directory: Path) -> dict:
    """Copy the previous set's best weights and dev run, checked first; returns their records."""
    records = json.loads((previous / MANIFEST).read_text())["files"]
    carried = {name: records[name] for name in BEST_FILES if name in records}
    problems = check_records(previous, carried)
    if problems:
        move_aside(previous, problems)
        raise RuntimeError(
            f"the best weights of checkpoint set {previous} changed on disk since it was written "
            f"({'; '.join(problems)}); the set was moved aside: run the training again to resume from the set before it"
        )
    for name in carried:  # copies, not hard links: a set must not share its blocks with the set it falls back to
        shutil.copyfile(previous / name, directory / name)
    return carried


def load_training_state(set_dir: Path, model, optimizer, scheduler) -> TrainingPosition:
    """Load a (verified) set's weights, optimiser and scheduler state; returns its position. A finished set has
    none: its position alone says the training is over, and the model is then copied out of it."""
    if is_finished(set_dir):
        return read_position(set_dir)
    load_weights(model, set_dir / "last.safetensors")
    tensors = load_file(str(set_dir / "optimizer.safetensors"))
    meta = json.loads((set_dir / "optimizer.json").read_text())
    state = {int(pid): {k: tensors[f"{pid}.{k}"] for k in keys} for pid, keys in meta["state_keys"].items()}
    optimizer.load_state_dict({"state": state, "param_groups": meta["param_groups"]})
    if scheduler is not None and meta["scheduler"] is not None:
        scheduler.load_state_dict(meta["scheduler"])
    return read_position(set_dir)


def export_best(set_dir: Path, model_out: Path, dev_run_out: Path) -> None:
    """Copy a set's best weights and dev run out as the trained model, each copy checked against the set's manifest
    (a set corrupted since it was verified is moved aside and nothing is written), and the model's own manifest
    beside it. Each file appears complete or not at all."""
    records = json.loads((set_dir / MANIFEST).read_text())["files"]
    staged = {name: model_out.parent / f".{name}.export.tmp" for name in BEST_FILES}
    try:
        for name, tmp in staged.items():
            shutil.copyfile(set_dir / name, tmp)
        problems = [p for name, tmp in staged.items() for p in check_records(tmp.parent, {tmp.name: records[name]})]
        if problems:
            move_aside(set_dir, problems)
            raise RuntimeError(
                f"the best weights in {set_dir} are corrupt ({'; '.join(problems)}); the set was moved aside: "
                "run the training again to resume from the set before it"
            )
        staged["best_dev.run"].replace(dev_run_out)
        write_manifest(model_out, records["best.safetensors"])
        staged["best.safetensors"].replace(model_out)
    finally:
        for tmp in staged.values():
            tmp.unlink(missing_ok=True)


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    """The rename itself on disk (POSIX: a directory's entries are flushed through the directory)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
