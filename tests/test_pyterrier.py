"""longrank.api.pyterrier.Reranker: an exported model in a PyTerrier pipeline, run by pt.Experiment on the
bundled Cranfield beside the first stage it reranks (the project's own BM25 run, as a pt.Transformer)."""

from __future__ import annotations

import pytest
import yaml

from conftest import REPO
from test_export import WORD, build_results

pytestmark = pytest.mark.stage  # a model, a stage or the workflow runs: not a unit test

pt = pytest.importorskip("pyterrier", reason="the pyterrier extra (pip install 'longrank[pyterrier]') is not installed")


@pytest.fixture(scope="module")
def cranfield_knrm(tmp_path_factory, ir_datasets_home):
    from longrank.api.export import export

    dataset = yaml.safe_load((REPO / "config" / "datasets" / "cranfield.yaml").read_text())
    models = {"knrm": {"type": "knrm", **WORD, "train": {"steps": 4, "batch_size": 4, "eval_every": 4}}}
    root = tmp_path_factory.mktemp("pt")
    results = build_results(root, models, dataset)
    return results, export(results, "knrm", 0, root / "exported" / "knrm")


def test_pt_experiment_compares_the_first_stage_and_the_exported_reranker(cranfield_knrm):
    import pandas as pd
    from ir_measures import RR, nDCG

    from longrank.data.corpus import Corpus
    from longrank.io.trec_files import read_run
    from longrank.api.pyterrier import Reranker

    results, exported = cranfield_knrm
    corpus = Corpus(results / "data")
    test = corpus.folds[0]["test"]
    run = read_run(results / "candidates" / "first.run")
    first_stage = pt.Transformer.from_df(
        pd.DataFrame([(q, d, s) for q in test for d, s in run[q].items()], columns=["qid", "docno", "score"])
    )
    topics = pd.DataFrame([(q, corpus.queries[q]) for q in test], columns=["qid", "query"])
    qrels = pd.DataFrame(
        [(q, d, g) for q in test for d, g in corpus.qrels.get(q, {}).items()], columns=["qid", "docno", "label"]
    )
    reranker = Reranker(exported, docstore=results / "data" / "docs.jsonl", device="cpu")
    table = pt.Experiment(
        [first_stage, first_stage >> reranker],
        topics,
        qrels,
        eval_metrics=[nDCG @ 10, RR @ 10],
        names=["first stage", "knrm"],
    )
    assert list(table["name"]) == ["first stage", "knrm"] and table["nDCG@10"].between(0, 1).all()

    # the pipeline's scores are the workflow's rerank stage's (its run file, 8 significant digits)
    out = (first_stage >> reranker)(topics)
    workflow = read_run(results / "runs" / "knrm.run")
    assert {(q, d): f"{s:.8g}" for q, d, s in zip(out["qid"], out["docno"], out["score"])} == {
        (q, d): f"{workflow[q][d]:.8g}" for q in test for d in run[q]
    }
    assert (out.groupby("qid")["rank"].min() == 0).all()
    # text given in the frame instead of a docstore: the same scores
    with_text = first_stage(topics).assign(text=lambda f: [corpus.docs[d] for d in f["docno"]])
    again = Reranker(reranker.ranker)(with_text)
    assert again.set_index(["qid", "docno"])["score"].to_dict() == out.set_index(["qid", "docno"])["score"].to_dict()
