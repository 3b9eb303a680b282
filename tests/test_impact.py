"""Fullrank from an impact index (QTI, Conformer-Kernel paper Sec. 3): a query's score is the sum of its terms' rows,
each query is ranked by its testing fold's index, top k and ties are deterministic, stats come with the run, a
bad index is an error naming the file; and the report's first-stage table shows the costs."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse

from longrank.errors import InputError
from longrank.io.json_yaml import write_json
from longrank.io.trec_files import write_qrels, write_run
from longrank.retrieval.impact import FORMAT, impact_run, load_index


TERMS = ["wing", "lift", "heat", "flux", "shock", "mach"]


def write_index(directory, dense, doc_ids, query_terms, depth=None, build_seconds=1.5, terms=TERMS, floors=None):
    """An index in the format ``NDRM.build_artifacts("fold", ...)`` writes: each row pruned to its top ``depth``;
    with ``floors``, rows store ``dense − floor`` and impact.json the floors."""
    matrix = np.asarray(dense, dtype=np.float32).copy()
    if floors is not None:
        matrix = (matrix - np.asarray(floors)[:, None]).astype(np.float32)
    if depth is not None:
        for row in matrix:
            row[np.argsort(-row, kind="stable")[depth:]] = 0.0
    directory.mkdir(parents=True, exist_ok=True)
    scipy.sparse.save_npz(directory / "impact.npz", scipy.sparse.csr_matrix(matrix))
    meta = {
        "format": FORMAT,
        "terms": terms,
        "doc_ids": doc_ids,
        "impact_depth": depth,
        "build_seconds": build_seconds,
        "query_terms": query_terms,
    }
    if floors is not None:
        meta["term_floors"] = [float(f) for f in floors]
    write_json(directory / "impact.json", meta)
    return directory


@pytest.fixture()
def collection():
    rng = np.random.default_rng(0)
    doc_ids = [f"D{i:02d}" for i in rng.permutation(40)]  # columns not in id order: ties must go by id, not column
    query_terms = {
        "q1": ["wing", "lift"],
        "q2": ["heat", "flux", "heat"],
        "q3": ["mach"],
        "q4": ["shock", "unknownterm"],
        "q5": ["wing"],
        "q6": ["flux", "shock"],
    }
    folds = [
        {"train": ["q5"], "dev": ["q6"], "test": ["q1", "q2"]},
        {"train": ["q5"], "dev": ["q6"], "test": ["q3", "q4"]},
    ]
    return doc_ids, query_terms, folds


def expected_ranking(dense, doc_ids, terms, k):
    rows = [TERMS.index(t) for t in terms if t in TERMS]
    sums = np.asarray(dense, dtype=np.float32)[rows].astype(np.float64).sum(axis=0)
    order = sorted(range(len(doc_ids)), key=lambda j: (-sums[j], doc_ids[j]))[:k]
    return [(doc_ids[j], sums[j]) for j in order]


def test_scores_are_sums_of_the_query_terms_rows_with_each_fold_ranking_its_test_queries(tmp_path, collection):
    doc_ids, query_terms, folds = collection
    rng = np.random.default_rng(1)
    dense = [rng.normal(size=(len(TERMS), 40)), rng.normal(size=(len(TERMS), 40))]  # NDRM3 scores can be negative
    dirs = [write_index(tmp_path / f"fold{k}", dense[k], doc_ids, query_terms) for k in (0, 1)]
    run, _ = impact_run(dirs, folds, {q: "text" for q in query_terms}, top_k=10)
    fold_of = {"q1": 0, "q2": 0, "q3": 1, "q4": 1, "q5": 0, "q6": 0}  # q5, q6: tested by no fold -> fold 0's model
    assert set(run) == set(query_terms)
    for q, k in fold_of.items():
        expected = expected_ranking(dense[k], doc_ids, query_terms[q], 10)
        assert list(run[q]) == [d for d, _ in expected]  # best first
        np.testing.assert_allclose(list(run[q].values()), [s for _, s in expected], rtol=1e-6)
    # a duplicated term counts twice (the model's sum over its processed terms); an unknown term adds nothing
    heat, flux = TERMS.index("heat"), TERMS.index("flux")
    best = next(iter(run["q2"]))
    assert run["q2"][best] == pytest.approx(
        2 * np.float32(dense[0][heat][doc_ids.index(best)]) + np.float32(dense[0][flux][doc_ids.index(best)]), rel=1e-6
    )
    assert list(run["q4"]) == [d for d, _ in expected_ranking(dense[1], doc_ids, ["shock"], 10)]
    # the other fold's index would rank q3 differently: the fold mattered
    assert list(run["q3"]) != [d for d, _ in expected_ranking(dense[0], doc_ids, ["mach"], 10)]


def test_term_floors_are_added_back_so_the_run_holds_the_models_scores(tmp_path, collection):
    """NDRM stores s_{t,d} − floor_t (entries ≥ 0); the run adds the query's floors back: the model's own sums."""
    doc_ids, query_terms, folds = collection
    dense = np.random.default_rng(5).normal(size=(len(TERMS), 40))
    floors = dense.min(axis=1) - 0.5  # strictly below every score: every entry stays stored
    dirs = [write_index(tmp_path / f"fold{k}", dense, doc_ids, query_terms, floors=floors) for k in (0, 1)]
    run, _ = impact_run(dirs, folds, query_terms, top_k=5)
    for q in ("q1", "q2", "q4"):
        expected = expected_ranking(dense, doc_ids, query_terms[q], 5)
        assert list(run[q]) == [d for d, _ in expected]
        np.testing.assert_allclose(list(run[q].values()), [s for _, s in expected], rtol=1e-5, atol=1e-5)
    bad = write_index(tmp_path / "bad", dense, doc_ids, query_terms, floors=floors)
    meta = json.loads((bad / "impact.json").read_text())
    (bad / "impact.json").write_text(json.dumps({**meta, "term_floors": [0.0]}))
    with pytest.raises(InputError, match="term_floors of another length than its 6 terms"):
        load_index(bad)


def test_a_pruned_index_retrieves_the_union_of_the_terms_postings(tmp_path, collection):
    doc_ids, query_terms, folds = collection
    dense = -np.abs(np.random.default_rng(2).normal(size=(len(TERMS), 40))) - 0.1  # all negative: none is cut at 0
    dirs = [write_index(tmp_path / f"fold{k}", dense, doc_ids, query_terms, depth=3) for k in (0, 1)]
    run, stats = impact_run(dirs, folds, query_terms, top_k=100)
    assert len(run["q3"]) == 3 and len(run["q1"]) <= 6 and len(run["q2"]) <= 6
    top_mach = np.argsort(-dense[TERMS.index("mach")], kind="stable")[:3]
    assert set(run["q3"]) == {doc_ids[j] for j in top_mach}
    assert all(s < 0 for s in run["q3"].values())
    assert stats["impact_depth"] == 3 and stats["nonzeros"] == 3 * len(TERMS)


def test_top_k_cuts_ties_by_document_id_whatever_the_column_order(tmp_path, collection):
    doc_ids, query_terms, folds = collection
    dense = np.zeros((len(TERMS), 40))
    dense[TERMS.index("mach")] = 1.0  # every document ties on q3
    dense[TERMS.index("mach"), doc_ids.index("D30")] = 2.0
    dirs = [write_index(tmp_path / f"fold{k}", dense, doc_ids, query_terms) for k in (0, 1)]
    run, _ = impact_run(dirs, folds, query_terms, top_k=4)
    assert list(run["q3"].items()) == [("D30", 2.0), ("D00", 1.0), ("D01", 1.0), ("D02", 1.0)]
    again, _ = impact_run(dirs, folds, query_terms, top_k=4)
    assert again == run
    assert "q1" not in run  # no stored score for any of its terms: no candidates (logged), not an empty entry
    assert impact_run(dirs, folds, query_terms, top_k=0)[0] == {}


def test_stats_describe_the_index_and_the_queries(tmp_path, collection):
    doc_ids, query_terms, folds = collection
    dense = np.random.default_rng(3).random((len(TERMS), 40))
    dirs = [
        write_index(tmp_path / f"fold{k}", dense, doc_ids, query_terms, depth=5, build_seconds=2.0 + k) for k in (0, 1)
    ]
    _, stats = impact_run(dirs, folds, query_terms, top_k=10)
    for key in ("query_seconds_mean", "query_ms_per_query", "index_bytes", "build_seconds", "terms", "nonzeros"):
        assert key in stats
    assert (
        stats["query_ms_per_query"] == pytest.approx(1000 * stats["query_seconds_mean"])
        and stats["query_seconds_mean"] > 0
    )
    assert stats["terms"] == len(TERMS) and stats["nonzeros"] == 5 * len(TERMS) and stats["folds"] == 2
    csr = scipy.sparse.load_npz(dirs[0] / "impact.npz")
    assert stats["index_bytes"] == csr.data.nbytes + csr.indices.nbytes + csr.indptr.nbytes
    assert stats["build_seconds"] == pytest.approx(2.5) and stats["build_seconds_total"] == pytest.approx(5.0)
    assert stats["queries"] == len(query_terms) and [f["queries"] for f in stats["per_fold"]] == [4, 2]
    json.dumps(stats)  # goes to candidates/{name}.stats.json as it is
    # the report's build-time cell: the folds' mean with their range (an index is built once per fold)
    from longrank.report.first_stages import build_cell

    per_fold = [f["build_seconds"] for f in stats["per_fold"]]
    assert build_cell(stats["build_seconds"], per_fold).text == "2.5 (mean; 2.0–3.0 over 2 folds)"


def test_bad_indexes_are_errors_naming_the_file(tmp_path, collection):
    doc_ids, query_terms, folds = collection
    dense = np.ones((len(TERMS), 40))
    good = write_index(tmp_path / "good", dense, doc_ids, query_terms)

    def error(directory, dirs=None):
        with pytest.raises(InputError) as err:
            impact_run(dirs or [good, directory], folds, query_terms, top_k=5)
        return str(err.value)

    assert str(tmp_path / "nothing" / "impact.json") in error(tmp_path / "nothing")
    other = write_index(tmp_path / "other", dense, doc_ids, query_terms)
    (other / "impact.json").write_text(json.dumps({"format": "someone-else/2", "terms": TERMS}))
    assert f"{other / 'impact.json'} has format 'someone-else/2'; expected '{FORMAT}'" in error(other)
    foreign = write_index(tmp_path / "foreign", dense, doc_ids, query_terms)
    np.savez(foreign / "impact.npz", scores=np.ones(3))  # an npz, but not a scipy.sparse matrix
    assert f"{foreign / 'impact.npz'} is not a scipy.sparse matrix" in error(foreign)
    text = write_index(tmp_path / "text", dense, doc_ids, query_terms)
    (text / "impact.npz").write_text("not a zip")
    assert str(text / "impact.npz") in error(text)
    mismatched = write_index(tmp_path / "mismatched", dense, doc_ids[:-1] + ["D99", "D98"], query_terms)
    assert "has shape (6, 40)" in error(mismatched) and "6 terms x 41 documents" in error(mismatched)
    stale = write_index(tmp_path / "stale", dense, doc_ids, {"q3": ["mach"]})
    assert "no query_terms for 1 of the collection's queries (e.g. ['q4'])" in error(stale)
    assert "1 index directories for 2 folds" in error(None, dirs=[good])
    assert load_index(good).nonzeros == len(TERMS) * 40


# --- the report's first-stage table -----------------------------------------------------------------------------------


@pytest.fixture()
def results(tmp_path):
    """A results directory with two first stages' candidates (bm25 and a model's fullrank) and qrels / folds."""
    rng = np.random.default_rng(4)
    root = tmp_path / "results"
    qids = [f"q{i}" for i in range(8)]
    docs = [f"D{i}" for i in range(50)]
    write_qrels(root / "data" / "qrels.txt", {q: {docs[i]: 1} for i, q in enumerate(qids)})
    write_json(root / "data" / "folds.json", [{"train": [], "dev": [], "test": qids}])
    for stage in ("bm25", "ndrm3_full"):
        write_run(
            root / "candidates" / f"{stage}.run", {q: {d: float(rng.normal()) for d in docs[:20]} for q in qids}, stage
        )
    write_json(
        root / "config.json",
        {
            "dataset": "toy",
            "models": {},
            "first_stages": {
                "bm25": {"method": "bm25", "top_k": 20},
                "ndrm3_full": {"method": "model", "model": "ndrm3", "top_k": 20},
            },
        },
    )
    return root


def first_stage_table(root, only=None):
    from types import SimpleNamespace

    from longrank.evaluate.metrics import read_folds, test_queries
    from longrank.io.json_yaml import read_json
    from longrank.io.trec_files import read_qrels, read_run
    from longrank.report import first_stages
    from longrank.report.context import Context

    # the parts of the report's Inputs (read from the files its manifest names) that the first-stage table reads
    stages = {s: spec for s, spec in read_json(root / "config.json")["first_stages"].items() if s in (only or s)}
    qids = test_queries(read_folds(root / "data" / "folds.json"))
    manifest = SimpleNamespace(candidate_stats={s: root / "candidates" / f"{s}.stats.json" for s in stages})
    runs = {s: read_run(root / "candidates" / f"{s}.run") for s in stages}
    inp = SimpleNamespace(
        first_stages=stages,
        default_first_stage=next(iter(stages)),
        candidates=runs.get,
        manifest=manifest,
        qrels=read_qrels(root / "data" / "qrels.txt"),
        test_qids=qids,
        evaluated_qids=qids,
    )
    cmp = SimpleNamespace(systems=[], primary="nDCG@10")  # no evaluations: recall and costs only
    sec = first_stages.section(Context(inp, cmp, root / "figures"))
    table = next(b for b in sec.blocks if b.kind == "table")
    rows = {r[0]: [getattr(c, "text", c) for c in r[1:]] for r in table.rows}
    return list(table.headers), rows, sec


def test_the_first_stage_tables_gain_cost_columns_from_the_stats_files(results):
    costs = ["Latency (ms/query)", "Index size (MB)", "Build time (s)"]
    write_json(
        results / "candidates" / "bm25.stats.json",
        {"method": "bm25", "index_seconds": 12.34, "query_seconds": 0.8, "query_ms_per_query": 0.1},
    )
    write_json(
        results / "candidates" / "ndrm3_full.stats.json",
        {
            "method": "model",
            "query_seconds_mean": 0.0025,
            "query_ms_per_query": 2.5,
            "index_bytes": 3_500_000,
            "build_seconds": 640.0,
            "terms": 120,
            "nonzeros": 290_000,
        },
    )
    headers, rows, sec = first_stage_table(results)
    assert headers == ["First stage", "Candidates", "R@10", "R@20", *costs]
    # BM25 reports no index size; each timing is one run (one pass over the queries, one indexing) and says so
    assert rows["bm25"][-3:] == ["0.100 (1 run)", "–", "12.3 (1 run)"]
    assert rows["ndrm3_full"][-3:] == ["2.500 (1 run)", "3.50", "640.0 (1 run)"]
    assert any(b.kind == "note" and "one fold's impact index" in b.text for b in sec.blocks)
    headers, rows, _ = first_stage_table(results, only="ndrm3_full")
    assert headers == ["First stage", "R@10", "R@20", *costs]
    assert rows["ndrm3_full"][-3:] == ["2.500 (1 run)", "3.50", "640.0 (1 run)"]
