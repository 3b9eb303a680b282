"""Same inputs, same bytes: the workflow run twice from scratch, once with --cores 1 and once with --cores 2, on a
local collection with 0-3 grades (KNRM with two training seeds, and MIR, whose scores once differed between two runs
of one commit), writes byte-identical rankings, evaluations and comparison tables. Every model job runs on one
thread whatever --cores says (MODEL_THREADS), and every seed is the config's, so the number of jobs side by side
changes no number."""

from __future__ import annotations

import pytest

from conftest import REPO, snakemake

pytestmark = pytest.mark.e2e
COLLECTIONS = REPO / "tests" / "collections"
# what a run writes that says when and where it ran rather than what it computed
TIMED = (".meta.yaml", ".log")


def run_from_scratch(tmp_path_factory, cores: int):
    workdir = tmp_path_factory.mktemp(f"cores{cores}")
    (workdir / "config").symlink_to(REPO / "config")
    (workdir / "collections").symlink_to(COLLECTIONS)
    configs = [str(COLLECTIONS / "graded.yaml"), str(COLLECTIONS / "same-bytes.yaml")]
    snakemake(workdir, "compare", "--cores", str(cores), "--configfile", *configs)
    return workdir / "results" / "graded"


def computed_files(results) -> dict[str, bytes]:
    return {
        str(path.relative_to(results)): path.read_bytes()
        for folder in ("runs", "eval", "compare")
        for path in sorted((results / folder).rglob("*"))
        if path.is_file() and not path.name.endswith(TIMED)
    }


def test_one_core_and_two_cores_write_the_same_bytes(tmp_path_factory, ir_datasets_home):
    one, two = (computed_files(run_from_scratch(tmp_path_factory, cores)) for cores in (1, 2))
    assert "runs/mir.run" in one and "runs/knrm@seed1.run" in one and "compare/pairs.csv" in one
    assert sorted(one) == sorted(two)
    differ = [name for name in one if one[name] != two[name]]
    assert not differ, f"{len(differ)} of {len(one)} files differ between --cores 1 and --cores 2: {differ}"
