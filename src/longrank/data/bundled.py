"""Collections shipped with the package, so that a fresh clone runs the default config with no network.

``bundled/cranfield/`` holds Cranfield's three files exactly as ir_datasets caches them after extracting its
download (``docs.txt``, ``queries.txt``, ``qrels.txt``, 1.7 MB; sha256 in ``SHA256``). Before ir_datasets
reads a bundled collection, ``seed_ir_datasets_cache`` copies the files it lacks into its cache directory
(``$IR_DATASETS_HOME/cranfield``, by default ``~/.ir_datasets/cranfield``); ir_datasets then finds them
and downloads nothing. Files already in the cache are never overwritten, and a collection that is not
bundled is left to ir_datasets, which downloads it as usual.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from longrank.io.atomic import atomic_path

BUNDLED = Path(__file__).parent / "bundled"

# ir_datasets id -> file -> sha256 of the copy shipped here (checked by the tests, so a corrupted or
# re-encoded copy fails there rather than changing every Cranfield number).
SHA256 = {
    "cranfield": {
        "docs.txt": "73d33d7e445b884bc32332034e7bc7d07ad5089d9030ead9f1de3493da21da1d",
        "qrels.txt": "92e54b58dac0b980152178f350d892fae66c8a239b8a11715b835fb8d2f6bc0e",
        "queries.txt": "99578ceb88941ef89c14faf7c63c23776a376d8fba319b990f01d0c601d8b03f",
    },
}


def ir_datasets_cache(dataset_id: str) -> Path:
    """The directory where ir_datasets keeps a collection's files (its top-level name: ``msmarco-document``
    for ``msmarco-document/trec-dl-2019``)."""
    import ir_datasets

    return ir_datasets.util.home_path() / dataset_id.split("/")[0]


def seed_ir_datasets_cache(dataset_id: str) -> list[Path]:
    """Copy a bundled collection's files that ir_datasets' cache lacks into it; returns the files copied."""
    files = SHA256.get(dataset_id)
    if files is None:
        return []
    target = ir_datasets_cache(dataset_id)
    copied = []
    for name in files:
        if (target / name).exists():
            continue
        with atomic_path(target / name) as tmp:
            shutil.copyfile(BUNDLED / dataset_id / name, tmp)
        copied.append(target / name)
    return copied


def sha256(path: str | os.PathLike) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
