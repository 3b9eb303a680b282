"""A user model's code is an input of its training and reranking (longrank.train.code.model_code): its file, the
modules beside it that it imports, and the package modules they import; read, never imported. The workflow half
(editing the file retrains that model and nothing else) is tests/test_user_model_e2e.py."""

from __future__ import annotations

import re
import sys

import pytest

from conftest import REPO
from longrank.train.code import model_code, training_code_digest

MODEL = """from helpers.pool import peak
from longrank.models.knrm import KNRM
import torch


class Mine(KNRM):
    reads = "words"
"""


def entry(spec: str) -> dict:
    return {"class": spec, "reads": "words", "max_doc_len": 50}


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A user's checkout: their model, a helper package beside it, a file beside it that it does not import."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "mine.py").write_text(MODEL)
    (tmp_path / "models" / "helpers").mkdir()
    (tmp_path / "models" / "helpers" / "__init__.py").write_text("")
    (tmp_path / "models" / "helpers" / "pool.py").write_text("def peak(x):\n    return x.max(dim=2).values\n")
    (tmp_path / "models" / "unrelated.py").write_text("X = 1\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_digest_covers_the_file_its_neighbours_it_imports_and_the_package_modules_they_import(checkout):
    roots, files = model_code(entry("models/mine.py:Mine"))
    assert sorted(files) == ["helpers/__init__.py", "helpers/pool.py", "mine.py"]  # not unrelated.py, not torch
    assert "longrank.models.knrm" in roots
    before = training_code_digest(entry("models/mine.py:Mine"))
    (checkout / "models" / "unrelated.py").write_text("X = 2\n")
    (checkout / "models" / "mine.py").write_text(MODEL + "# a comment changes no arithmetic\n")
    assert training_code_digest(entry("models/mine.py:Mine")) == before
    (checkout / "models" / "helpers" / "pool.py").write_text("def peak(x):\n    return x.min(dim=2).values\n")
    assert training_code_digest(entry("models/mine.py:Mine")) != before


def test_a_module_spec_is_found_on_the_path_without_importing_it(checkout, monkeypatch):
    monkeypatch.syspath_prepend(str(checkout))
    roots, files = model_code(entry("models.mine:Mine"))
    # found from the sys.path entry: the neighbours are the package's modules (models/helpers/...)
    assert sorted(files) == ["models/mine.py"] and "longrank.models.knrm" in roots
    assert "models.mine" not in sys.modules and "models" not in sys.modules


def test_the_papers_models_keep_their_digests():
    from longrank.results.code_digest import code_digest

    assert training_code_digest({"type": "knrm"}) == code_digest("longrank.train.train", "longrank.models.knrm")


def test_the_example_model_is_digested_with_the_package_modules_it_builds_on(monkeypatch):
    monkeypatch.chdir(REPO)
    roots, files = model_code(entry("examples/your_model/kernel_max.py:KernelMax"))
    assert list(files) == ["kernel_max.py"]
    assert "longrank.models.modules.word_embedder" in roots


@pytest.mark.stage  # Snakemake plans the example in a new interpreter
def test_the_workflow_plans_a_user_model_without_importing_it_or_torch(tmp_path):
    """``snakemake -n`` with examples/your_model.yaml: the user's model gets its training, reranking and bench jobs,
    and the parse (config checks, code digests) imports neither torch nor the user's file."""
    import subprocess

    from conftest import snakemake_command

    (tmp_path / "config").symlink_to(REPO / "config")
    (tmp_path / "examples").symlink_to(REPO / "examples")
    args = ["-n", "report", "--configfile", "examples/mine.yaml", "examples/your_model.yaml"]
    cmd, env = snakemake_command(tmp_path, *args)
    probe = (
        "import json, sys, snakemake.cli\n"
        "try:\n    snakemake.cli.main(sys.argv[1:])\nexcept SystemExit as done:\n    code = done.code\n"
        "heavy = sorted(m for m in sys.modules if m == 'torch' or 'kernel_max' in m)\n"
        "print('IMPORTED', json.dumps(heavy), code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *cmd[3:]], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert "IMPORTED [] 0" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    for planned in ("models/kernel_max/fold0/model.safetensors", "runs/kernel_max.run", "bench/kernel_max.json"):
        assert f"results/mine/{planned}" in done.stdout, planned
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", done.stdout + done.stderr, re.M))
    assert counts["train"] == counts["rerank"] == counts["bench"] == "2", counts  # KNRM's and the user model's
