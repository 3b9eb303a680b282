"""A user model's code is an input of its training and reranking (longrank.train.code.model_code): its file, the
modules beside it that it imports, and the package modules they import; read, never imported. The workflow half
(editing the file retrains that model and nothing else) is tests/test_user_model_e2e.py."""

from __future__ import annotations

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
