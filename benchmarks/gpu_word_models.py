"""The word models of a config at its (the papers') dimensions, with random weights, benched by ``longrank bench``
on a prepared collection's text: speed and memory do not depend on the weights or on the words' vectors, so a GPU
figure needs no trained model and no GloVe download.

The prepared collection (``results/<dataset>/data``) is copied; its vocabulary gets random 300-d vectors (the
papers' GloVe width, for models whose ``embeddings`` is a file) and random word2vec vectors of 2 x 128 (the
Conformer-Kernel paper's IN || OUT, for ``embeddings: word2vec``). NDRM is benched with ``text_processing:
words`` (the time is the same as ``ck``'s, and the stemmer need not be installed).

    python benchmarks/gpu_word_models.py --data results/cranfield/data --config config/trec-dl.yaml \\
        --models knrm tk tkl tkl_4k ndrm1 ndrm2 ndrm3 --lengths 200 2000 4000 --device cuda --out benchmarks/gpu-h100

writes ``bench_<model>.json`` per model (the bench stage's JSON: docs/ms with the spread of 5 timed passes, peak
memory, TKL's packed / unpacked rows). docs/studies/speed.md has the H100 figures.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import yaml

from longrank.validation.validate import resolve_likes
from longrank.data.corpus import Corpus
from longrank.models.checkpoint import save_weights
from longrank.models.registry import build_model


def random_vectors(path: Path, words: list[str], dim: int, rng: np.random.Generator) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"{len(words)} {dim}\n")
        for word in words:
            f.write(word + " " + " ".join(f"{x:.4f}" for x in rng.standard_normal(dim) * 0.3) + "\n")


def prepare_data(source: Path, work: Path) -> Path:
    """A copy of the prepared collection with random 300-d vectors beside it and random word2vec vectors in it."""
    data = work / "data"
    shutil.copytree(source, data)
    rows = (data / "word_doc_freq.tsv").read_text(encoding="utf-8").splitlines()[1:]
    words = [line.split("\t")[0] for line in rows]
    rng = np.random.default_rng(0)
    random_vectors(work / "vectors300.txt", words, 300, rng)
    random_vectors(data / "word2vec.txt", words, 256, rng)
    meta = json.loads((data / "word2vec.json").read_text()) if (data / "word2vec.json").exists() else {}
    (data / "word2vec.json").write_text(json.dumps({**meta, "dim": 128, "width": 256, "words": len(words)}))
    return data


def bench_entry(entry: dict, vectors: Path) -> dict:
    """The config entry as benched: no training keys, the random vectors, NDRM on plain words."""
    entry = {k: v for k, v in entry.items() if k not in ("train", "like", "enabled")}
    if str(entry.get("embeddings", "")).endswith(".txt"):
        entry["embeddings"] = str(vectors)
    if entry["type"] == "ndrm":
        entry.update(text_processing="words", min_doc_freq=1)
    return entry


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, type=Path, help="a prepared collection (results/<dataset>/data)")
    parser.add_argument("--config", default="config/trec-dl.yaml", help="the config whose models: entries to bench")
    parser.add_argument("--models", nargs="+", required=True)
    parser.add_argument("--lengths", nargs="+", default=["200", "2000", "4000"])
    parser.add_argument("--batch-size", default="32")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per model's bench")
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    models = yaml.safe_load(Path(args.config).read_text())["models"]
    resolve_likes(models)
    with tempfile.TemporaryDirectory(prefix="gpu-word-models-") as tmp:
        data = prepare_data(args.data, Path(tmp))
        corpus = Corpus(data)
        for name in args.models:
            entry = bench_entry(models[name], Path(tmp) / "vectors300.txt")
            torch.manual_seed(0)
            checkpoint = Path(tmp) / f"{name}.safetensors"
            save_weights(build_model(entry, corpus), checkpoint)
            command = [sys.executable, "-m", "longrank", "bench", "--model", name, "--model-config", json.dumps(entry)]
            command += ["--checkpoint", str(checkpoint), "--data", str(data), "--lengths", *args.lengths]
            command += ["--batch-size", args.batch_size, "--device", args.device]
            command += ["--out", str(args.out / f"bench_{name}.json")]
            print(name, json.dumps(entry), flush=True)
            subprocess.run(command, check=True, timeout=args.timeout)


if __name__ == "__main__":
    main()
