"""A file's size and SHA-256 as a manifest records them, and the check of files against their records: what a model's
weights (``model.manifest.json``, :mod:`longrank.models.checkpoint`) and a training's checkpoint sets
(:mod:`longrank.train.state_sets`) are verified with. Torch-free, so that checking a set needs no torch."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def sha256_of(path: str | Path) -> str:
    """The file's SHA-256, read in blocks (a checkpoint may be gigabytes)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def file_record(path: str | Path) -> dict:
    """What a manifest records of one file: its size and content hash."""
    return {"size": os.path.getsize(path), "sha256": sha256_of(path)}


def check_records(directory: Path, records: dict[str, dict]) -> list[str]:
    """The files of ``records`` (names relative to ``directory``) that are missing or differ from their record,
    each with the reason; empty when all match. The size is compared first: a truncated file is not hashed."""
    problems = []
    for name, record in records.items():
        path = directory / name
        if not path.is_file():
            problems.append(f"{name} is missing")
        elif os.path.getsize(path) != record["size"]:
            problems.append(f"{name} has {os.path.getsize(path)} bytes, the manifest says {record['size']}")
        elif sha256_of(path) != record["sha256"]:
            problems.append(f"{name}'s SHA-256 differs from the manifest's (the file changed after it was written)")
    return problems
