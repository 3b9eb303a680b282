"""The training fingerprint covers every file a training reads (``longrank.train.input_files``): a local encoder's
tokenizer changed in place is another training, and so is another thread count; and, observed with ``strace``, no
file a training of any model type of the default config opens escapes the fingerprint."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from longrank.data.corpus import Corpus
from longrank.io.trec_files import read_run
from longrank.models.modules.encoders import minilm_path
from longrank.train.fingerprint import changed_inputs, fingerprint_of, training_inputs
from longrank.train.input_files import covered_files
from longrank.train.position import TrainingPosition


def local_encoder(directory: Path) -> Path:
    """A local encoder directory (``encoder: path/to/dir``): MiniLM's files, its weights linked, not copied."""
    source = Path(minilm_path())
    for path in source.rglob("*"):
        if path.is_file():
            target = directory / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(path) if path.suffix == ".safetensors" else shutil.copyfile(path, target)
    return directory


def inputs_of(tiny_data: Path, entry: dict) -> dict[str, str]:
    corpus = Corpus(tiny_data / "data")
    return training_inputs(entry, corpus, corpus.folds[0], 30, read_run(tiny_data / "bm25.run"), built={})


def test_a_local_encoders_tokenizer_changed_in_place_is_another_training(tiny_data):
    encoder = local_encoder(tiny_data / "encoder")
    entry = {"type": "bert_ranker", "encoder": str(encoder), "train": {"steps": 2}}
    before = inputs_of(tiny_data, entry)
    tokenizer = json.loads((encoder / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    vocab["wing"], vocab["lift"] = vocab["lift"], vocab["wing"]  # same path, same weights, other token ids
    (encoder / "tokenizer.json").write_text(json.dumps(tokenizer))
    after = inputs_of(tiny_data, entry)
    assert fingerprint_of(after) != fingerprint_of(before)
    saved = TrainingPosition(fingerprint=fingerprint_of(before), inputs=before)
    assert changed_inputs(saved, after) == "changed since it was saved: file encoder/tokenizer.json"
    # the files are keyed by their place in the folder: a copy elsewhere differs by the config's path alone
    moved = shutil.copytree(encoder, tiny_data / "elsewhere", symlinks=True)
    assert changed_inputs(TrainingPosition(inputs=after), inputs_of(tiny_data, {**entry, "encoder": str(moved)})) == (
        "changed since it was saved: model entry"
    )


def test_the_thread_count_is_an_input(tiny_data):
    entry = {"type": "knrm", "train": {"steps": 2}}
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = inputs_of(tiny_data, entry)
        torch.set_num_threads(2)
        two = inputs_of(tiny_data, entry)
    finally:
        torch.set_num_threads(threads)
    assert changed_inputs(TrainingPosition(inputs=one), two) == "changed since it was saved: threads"


# Every model type of config/config.yaml, tiny, trained two steps (MIR aside: its graph set is a collection artifact,
# a directory the fingerprint digests whole).
TINY = {"steps": 2, "batch_size": 2, "negatives": 1, "eval_every": 2, "patience": 1}
MODELS = {
    "knrm": {"type": "knrm", "max_doc_len": 60, "query_term_weights": "idf"},
    "tk": {"type": "tk", "max_doc_len": 60},
    "tkl": {"type": "tkl", "max_doc_len": 100},
    "ndrm": {
        "type": "ndrm",
        "variant": "ndrm3",
        "embeddings": "word2vec",
        "max_doc_len": 64,
        "hidden_dim": 16,
        "n_heads": 2,
        "conv_groups": 2,
    },
    "bert_ranker": {"type": "bert_ranker", "encoder": "minilm", "passage_len": 32, "pooling": "mean"},
    "mores": {"type": "mores", "encoder": "minilm", "max_doc_len": 32},
    "bi_encoder": {"type": "bi_encoder", "encoder": "minilm", "max_doc_len": 32},
}
OPENED = re.compile(r'^\d+\s+open(?:at)?\((?:AT_FDCWD, )?"((?:[^"\\]|\\.)*)"')
LIBRARY_SUFFIXES = (".py", ".pyc", ".so", ".pyi", ".pth", ".typed")


def opened_files(trace: Path, cwd: Path) -> set[Path]:
    """The regular files the traced processes opened (successfully), resolved."""
    found = set()
    for line in trace.read_text(errors="replace").splitlines():
        match = OPENED.match(line)
        if match:
            path = (cwd / match.group(1).encode().decode("unicode_escape")).resolve()
            if path.is_file():
                found.add(path)
    return found


def is_library(path: Path) -> bool:
    """Python's, the libraries' and the system's own files: code, compiled extensions, package metadata."""
    text = str(path)
    return (
        path.suffix in LIBRARY_SUFFIXES
        or ".so." in path.name
        or path.name == "pyvenv.cfg"
        or any(part.endswith((".dist-info", ".egg-info")) or part == "__pycache__" for part in path.parts)
        or text.startswith(("/proc/", "/sys/", "/dev/", "/etc/", "/usr/lib/", "/lib/", "/usr/share/zoneinfo/"))
    )


@pytest.mark.stage
@pytest.mark.skipif(shutil.which("strace") is None, reason="observing the files a process opens needs strace")
@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_file_a_training_opens_is_covered_by_its_fingerprint(tiny_data, name):
    data, out = tiny_data / "data", tiny_data / "results" / "models" / name / "fold0" / "model.safetensors"
    entry = {**MODELS[name], "train": TINY}
    if entry.get("embeddings") == "word2vec":  # the word2vec stage's files in the data folder
        w2v = [sys.executable, "-m", "longrank", "word2vec", "--docs", str(data / "docs.jsonl")]
        subprocess.run([*w2v, "--dim", "16", "--epochs", "1", "--out", str(data / "word2vec.txt")], check=True)
    trace = tiny_data / "trace.txt"
    train = [sys.executable, "-m", "longrank", "train", "--model", name, "--model-config", json.dumps(entry)]
    train += ["--data", str(data), "--candidates", str(tiny_data / "bm25.run"), "--rerank-depth", "10"]
    strace = ["strace", "-f", "-qq", "-e", "trace=open,openat", "-e", "status=successful", "-o", str(trace)]
    done = subprocess.run(
        [*strace, *train, "--device", "cpu", "--out", str(out)], cwd=tiny_data, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    inputs = [p for p in opened_files(trace, tiny_data) if not is_library(p) and out.parent not in p.parents]
    from longrank.models.registry import constructor_defaults

    resolved = {**constructor_defaults(entry["type"]), **entry}
    covered = covered_files(resolved, data, data)
    covered[(tiny_data / "bm25.run").resolve()] = "candidates"  # the stage's argument, parsed into the fingerprint
    escaped = sorted(str(p) for p in inputs if p not in covered)
    assert not escaped, f"files the training of {name} opened that its fingerprint does not cover: {escaped}"
    assert any(why.startswith("file ") for p, why in covered.items() if p in inputs)  # its own files were seen
