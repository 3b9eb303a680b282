"""A researcher's own model through the whole workflow (docs/your-model.md): examples/your_model.yaml names
examples/your_model/kernel_max.py beside KNRM over the example collection; the report's files have its row, its
untrained floor and its bench row, and editing its file retrains it and nothing else."""

from __future__ import annotations

import json
import re
import shutil

import pandas as pd
import pytest

from conftest import REPO, snakemake

pytestmark = pytest.mark.e2e  # the workflow runs for real (about two minutes on two cores)

CONFIG = ["--configfile", "examples/mine.yaml", "examples/your_model.yaml"]
MODEL_FILE = "examples/your_model/kernel_max.py"


def workdir_for(tmp_path):
    """The user's checkout: the defaults, the example collection, and their own copy of the model (edited below)."""
    (tmp_path / "config").symlink_to(REPO / "config")
    (tmp_path / "examples" / "your_model").mkdir(parents=True)
    (tmp_path / "examples" / "mine").symlink_to(REPO / "examples" / "mine")
    for name in ("mine.yaml", "your_model.yaml", "your_model/kernel_max.py"):
        shutil.copy(REPO / "examples" / name, tmp_path / "examples" / name)
    return tmp_path


def planned(workdir) -> dict[str, int]:
    """The jobs ``snakemake -n report`` plans, by rule (the shipped profiles' rerun triggers, params among them)."""
    done = snakemake(workdir, "-n", "report", *CONFIG)
    output = done.stdout + done.stderr
    return {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", output, re.M) if rule != "total"}


def test_a_user_model_runs_beside_knrm_and_its_file_is_an_input(tmp_path, ir_datasets_home):
    workdir = workdir_for(tmp_path)
    snakemake(workdir, "report", *CONFIG)
    results = workdir / "results" / "mine"
    table = pd.read_csv(results / "compare" / "table.csv")
    assert {"knrm", "kernel_max", "kernel_max+bm25"} <= set(table.system)
    own = table[(table.system == "kernel_max") & (table.measure == "nDCG@10")]
    assert len(own) == 1 and 0 <= own["mean"].item() <= 1 and own["n_queries"].item() == 4, own
    floors = pd.read_csv(results / "compare" / "floors" / "pairs.csv")
    own_floor = "query_term_matches@bm25-top50-first200w"  # the count over the 200 words its entry says it reads
    assert ("kernel_max", own_floor) in set(zip(floors.system_a, floors.system_b))
    bench = json.loads((results / "bench" / "kernel_max.json").read_text())
    assert [row[1] for row in bench["rows"]] == [50, 200] and all(row[3] > 0 for row in bench["rows"])
    report = (results / "report" / "report.md").read_text()
    row = re.search(r"^\| \w \| kernel_max \| 200 \| ([\d.]+) \(1 run\) \|", report, re.M)  # docs/ms, the bench's
    assert row and float(row.group(1)) > 0, "no report row for kernel_max with its bench"

    exported_and_loaded_with_trust(workdir, tmp_path / "kernel_max")

    assert planned(workdir) == {}  # all done
    model = workdir / MODEL_FILE
    model.write_text(model.read_text() + "\n# a comment: no arithmetic changes, nothing reruns\n")
    assert planned(workdir) == {}
    model.write_text(model.read_text().replace("* 0.01  # [B, Lq, K], as KNRM", "* 0.02  # [B, Lq, K]"))
    jobs = planned(workdir)
    assert jobs.get("train") == 1 and jobs.get("rerank") == 1, jobs  # kernel_max's, not KNRM's
    assert "data" not in jobs and "candidates" not in jobs, jobs


def exported_and_loaded_with_trust(workdir, out) -> None:
    """``longrank export`` writes the class spec, not the code; loading the export needs the caller's trust (API and
    CLI), and then scores as the workflow's model, its class found from the working directory as the spec says."""
    import os

    from longrank.api import UnknownQueryWarning, load_ranker
    from longrank.cli import main
    from longrank.errors import InputError

    results = workdir / "results" / "mine"
    cwd = os.getcwd()
    os.chdir(workdir)  # the user's checkout, where the spec's path leads
    try:
        main(["export", "--results", str(results), "--model", "kernel_max", "--fold", "0", "--out", str(out)])
        meta = json.loads((out / "ranker.json").read_text())
        assert meta["type"] == "user" and meta["class"] == "examples/your_model/kernel_max.py:KernelMax"
        assert not list(out.rglob("*.py"))  # no code travels with the export
        with pytest.raises(InputError, match=r"not one of LongRank's; .*trust_code=True .*--trust-code"):
            load_ranker(out)
        ranker = load_ranker(out, trust_code=True)
        assert type(ranker.model).__name__ == "KernelMax"
        scores = ranker.score("wing lift", ["the wing gives lift", "a heat slab"])
        assert len(scores) == 2 and all(s == s for s in scores)
        unseen = REPO / "examples" / "unseen"
        rerank = ["rerank", "--ranker", str(out), "--run", str(unseen / "bm25.trec"), "--device", "cpu"]
        rerank += ["--queries", str(unseen / "queries.tsv"), "--docs", str(unseen / "docs.jsonl")]
        with pytest.raises(SystemExit):  # the CLI prints the error and exits non-zero
            main([*rerank, "--out", str(out.parent / "refused.trec")])
        assert not (out.parent / "refused.trec").exists()
        with pytest.warns(UnknownQueryWarning, match=r"query 'u4' has no word"):  # as KNRM's (test_examples.py)
            main([*rerank, "--out", str(out.parent / "unseen.trec"), "--trust-code"])
        assert (out.parent / "unseen.trec").read_text().strip()
    finally:
        os.chdir(cwd)
