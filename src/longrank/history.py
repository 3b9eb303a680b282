"""Stage ``history``: keep a model's results of every setting it ran with, so that changing a setting overwrites
nothing for good.

A model's outputs (weights, runs, evaluations) live at fixed paths under ``results/<name>/`` and the next setting's
job replaces them. After each evaluation, this stage copies them into ``results/<name>/history/<model>/<settings
hash>/``: ``settings.json`` (the model's config entry, the first stage it reranks, its code digests, when and from
which commit), its systems' per-query evaluations and runs (the model's and its interpolation's), each fold's
training summary, and, with ``history.weights``, each fold's finished training state (the best weights, their dev run
and the position, a few hundred MB for a BERT-base model; hard-linked, so the current setting's costs no second
copy). An entry is keyed by the settings and the data they ran on (``data_digests``: the data stage's documents,
queries, judgments and folds and the first stage's candidates, by content): a rerun with the same settings on the
same data replaces its entry, the same settings on changed judgments are another entry. ``history.keep`` entries per model are kept (the newest by archive time; the
current one always), so the disk a model's history takes is bounded by ``keep`` times its entry's size.

Two readers: the report's experiment log (``report/history.py``: every kept setting's scores beside today's, with
what changed), and training (``--history``): going back to a kept setting copies its finished state back, and the
model comes out of it without a training step (``train/state_sets.py``'s ``find_finished_set``, the same
fingerprint check a resume makes).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import shutil
from datetime import datetime, UTC
from pathlib import Path

from longrank.evaluate.metrics import read_eval_tsv
from longrank.errors import InputError
from longrank.io.atomic import link_or_copy, replace_directory
from longrank.io.json_yaml import json_object, read_json, write_json
from longrank.results.file_records import sha256_of
from longrank.results.run_metadata import file_sha256, source
from longrank.train.state_sets import is_finished, set_problems, sets_newest_first

log = logging.getLogger(__name__)

SETTINGS = "settings.json"
#: the data stage's outputs a setting's training, reranking and evaluation read, by their role in settings.json
DATA_FILES = {"docs": "docs.jsonl", "queries": "queries.tsv", "qrels": "qrels.txt", "folds": "folds.json"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="the model's name in the config")
    parser.add_argument(
        "--settings", required=True, help="the model's settings as JSON (entry, first stage, code digests)"
    )
    parser.add_argument("--systems", nargs="+", required=True, help="the model's systems (itself, its interpolation)")
    parser.add_argument("--evals", nargs="+", required=True, help="eval/<system>.tsv, in --systems' order")
    parser.add_argument("--runs", nargs="+", required=True, help="the systems' run files, in --systems' order")
    parser.add_argument("--summaries", nargs="*", default=[], help="each fold's train_summary.json (trained models)")
    parser.add_argument("--keep", type=int, required=True, help="entries kept per model (history.keep)")
    parser.add_argument("--weights", choices=["true", "false"], required=True, help="keep the finished states")
    parser.add_argument("--data", required=True, help="results/<name>/data: the data the setting ran on")
    parser.add_argument("--candidates", required=True, help="the first stage's candidates the model reranked")
    parser.add_argument("--out", required=True, help="results/<name>/history/<model>/latest.json")


def settings_hash(settings: dict) -> str:
    """The first 12 hex digits of the settings' SHA-256 (canonical JSON)."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]


def entry_hash(settings: dict, data: dict[str, str]) -> str:
    """An entry's folder name: of the settings and the data they ran on, so that a setting run again on changed
    judgments (or documents, folds, candidates) is a new entry beside the old data's, not its replacement."""
    return settings_hash({"settings": settings, "data": data})


def data_digests(data_dir: Path, candidates: Path) -> dict[str, str]:
    """The SHA-256 of each data file a setting ran on, by role (``DATA_FILES``, then ``candidates``). The data
    stage's files through ``file_sha256``'s cache (the collection's documents are hashed once, not per model)."""
    found = {role: file_sha256(data_dir / name) for role, name in DATA_FILES.items()}
    return {**found, "candidates": sha256_of(candidates)}


def finish_interrupted(model_dir: Path) -> list[str]:
    """Complete or clean what a history stage killed mid-way left in ``model_dir``: a staging folder
    (``.partial-<hash>``) is removed; an entry moved aside by ``replace_directory`` (``.<hash>.<random>.old``) whose
    replacement never arrived is put back (the entry as it was), and one whose replacement did is removed. Hidden
    folders are no entries, so ``keep`` would never prune them. Returns what it did, for the log."""
    done = []
    hidden = (
        sorted(p for p in model_dir.iterdir() if p.name.startswith(".") and p.is_dir()) if model_dir.is_dir() else []
    )
    for path in hidden:
        if path.name.startswith(".partial-"):
            shutil.rmtree(path)
            done.append(f"removed {path.name}")
        elif path.name.endswith(".old"):
            entry = model_dir / path.name[1:].split(".")[0]
            if entry.exists():
                shutil.rmtree(path)
                done.append(f"removed {path.name}")
            else:
                path.rename(entry)
                done.append(f"put {path.name} back as {entry.name}")
    return done


def entries(model_dir: Path) -> list[Path]:
    """A model's kept entries, newest archived first (their settings.json's ``archived`` time)."""
    found = (
        [p for p in model_dir.iterdir() if p.is_dir() and not p.name.startswith(".") and (p / SETTINGS).is_file()]
        if model_dir.is_dir()
        else []
    )
    return sorted(found, key=lambda p: read_json(p / SETTINGS)["archived"], reverse=True)


def run(args: argparse.Namespace) -> None:
    settings = json_object(args.settings, "--settings")
    if not (len(args.systems) == len(args.evals) == len(args.runs)):
        raise InputError("--systems, --evals and --runs must name the same number of files, in the same order")
    if args.keep < 1:
        raise InputError(f"history.keep is {args.keep}; expected at least 1 (the current setting's entry)")
    out = Path(args.out)
    model_dir = out.parent
    for done in finish_interrupted(model_dir):
        log.warning("history of %s: an earlier history job was interrupted: %s", args.model, done)
    data = data_digests(Path(args.data), Path(args.candidates))
    digest = entry_hash(settings, data)
    entry = model_dir / digest
    staged = model_dir / f".partial-{digest}"
    staged.mkdir(parents=True)
    scores = {}
    (staged / "eval").mkdir()
    (staged / "runs").mkdir()
    for system, eval_path, run_path in zip(args.systems, args.evals, args.runs):
        frame = read_eval_tsv(eval_path)
        scores[system] = {measure: float(frame[measure].mean()) for measure in frame.columns}
        shutil.copyfile(eval_path, staged / "eval" / f"{system}.tsv")
        shutil.copyfile(run_path, staged / "runs" / f"{system}.run")
    kept_states = []
    for summary in map(Path, args.summaries):
        fold_dir = staged / summary.parent.name  # fold<k>
        fold_dir.mkdir()
        shutil.copyfile(summary, fold_dir / "train_summary.json")
        state = _finished_set(summary.parent / "train_state")
        if args.weights == "true" and state is not None:
            shutil.copytree(state, fold_dir / "train_state" / state.name, copy_function=link_or_copy)
            kept_states.append(summary.parent.name)
    write_json(
        staged / SETTINGS,
        {
            "model": args.model,
            "hash": digest,
            "settings": settings,
            "data": data,
            "scores": scores,
            "archived": datetime.now(UTC).isoformat(),  # UTC, to the microsecond: sorts as it reads
            "source": source(),
            "weights": kept_states,
        },
    )
    replace_directory(staged, entry)
    dropped = [p.name for p in entries(model_dir)[args.keep :] if p != entry]
    for name in dropped:
        shutil.rmtree(model_dir / name)
    kept = [p.name for p in entries(model_dir)]
    size = sum(f.stat().st_size for name in kept for f in (model_dir / name).rglob("*") if f.is_file())
    write_json(out, {"model": args.model, "current": digest, "kept": kept, "keep": args.keep, "bytes": size})
    log.info(
        "history of %s: setting %s archived (%d kept, %.1f MB%s)",
        args.model,
        digest,
        len(kept),
        size / 1e6,
        f"; dropped the oldest: {', '.join(dropped)}" if dropped else "",
    )


def _finished_set(state_dir: Path) -> Path | None:
    """A training's finished checkpoint set, when it left one that verifies (a zero-shot model leaves none)."""
    newest = next(iter(sets_newest_first(state_dir)), None)
    if newest is None or set_problems(newest) or not is_finished(newest):
        return None
    return newest
