"""Stages are found by their name (issue 42 item 4): stage ``X`` of ``python -m longrank X`` runs
``src/longrank/X.py`` or ``src/longrank/<package>/X.py`` (``longrank.cli``'s docstring), with no table of exceptions;
``longrank rerank --ranker`` is an explicit alias of stage ``rerank_run``."""

from __future__ import annotations

import ast

import pytest

from longrank.cli import ALIASES, STAGES, main, stage_module, stage_of

from conftest import REPO

SRC = REPO / "src"


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_a_stages_module_is_named_as_the_stage(stage):
    module = stage_module(stage)
    parts = module.split(".")
    assert parts[0] == "longrank" and len(parts) in (2, 3) and parts[-1] == stage, (
        f"stage {stage!r} runs {module}: name its module longrank.{stage} or longrank.<package>.{stage}"
    )
    path = SRC.joinpath(*parts).with_suffix(".py")
    assert path.is_file(), path
    defined = {n.name for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef)}
    assert {"add_arguments", "run"} <= defined, f"{path.relative_to(REPO)} lacks add_arguments / run"


def test_each_stage_name_is_one_module():
    """``src/longrank/**/<stage>.py`` is one file: the grep for a stage's ``def run`` finds it alone."""
    for stage in STAGES:
        found = [p for p in (SRC / "longrank").rglob(f"{stage}.py") if "def run(" in p.read_text()]
        assert found == [SRC.joinpath(*stage_module(stage).split(".")).with_suffix(".py")], stage


def test_the_alias_runs_the_stage_it_names(tmp_path, capsys):
    assert ALIASES == {"rerank": ("--ranker", "rerank_run")} and "rerank_run" in STAGES
    assert stage_of("rerank", ["--model", "tk"]) == "rerank" and stage_of("rerank", ["--ranker=x"]) == "rerank_run"
    assert stage_of("rerank", ["--ranker", "x"]) == "rerank_run" and stage_of("rerank_run", []) == "rerank_run"
    # the same stage and arguments either way; messages name the stage as typed (a directory as --run: refused
    # before any model is read)
    given = ["--ranker", "x", "--run", str(tmp_path), "--queries", "q", "--docs", "d", "--out", "o"]
    for typed in ("rerank", "rerank_run"):
        with pytest.raises(SystemExit) as stopped:
            main([typed, *given])
        assert stopped.value.code == 2
        assert capsys.readouterr().err == f"longrank {typed}: error: --run: {tmp_path} is a directory; expected a file\n"
