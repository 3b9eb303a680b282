"""Writing and loading the resumable training state's tensors, as safetensors (never pickle), into and out of the
checkpoint sets that verify themselves (what a set holds, its names, its verification and a finished training's set:
:mod:`longrank.train.state_sets`). Model weights themselves (and loading a trained model) are
:mod:`longrank.models.checkpoint`'s."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from longrank.results.file_records import check_records, file_record
from longrank.io.json_yaml import write_json
from longrank.models.checkpoint import load_weights, save_weights, write_manifest
from longrank.train.position import TrainingPosition
from longrank.train.state_sets import (
    BEST_FILES,
    KEEP_SETS,
    MANIFEST,
    fsync_dir,
    fsync_file,
    is_finished,
    move_aside,
    read_position,
    set_name,
    sets_newest_first,
)


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
        fsync_file(tmp / MANIFEST)
        if final.exists():  # the same step written again (a resume after its set was moved aside): the new one wins
            shutil.rmtree(final)
        tmp.rename(final)
        fsync_dir(state_dir)
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
        fsync_file(directory / name)
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
