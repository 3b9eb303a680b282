"""How closely the ``pisa`` first stage (PISA through pyterrier-pisa) agrees with ``bm25`` (bm25s) on a real collection.

    nice -n 10 python benchmarks/first_stage_agreement.py --dataset cranfield
    nice -n 10 python benchmarks/first_stage_agreement.py --dataset irled --collection-dir /path/to/data/irled

The collection is prepared by the data stage's own code (``longrank.data.data``: the dataset description of
``config/datasets/<name>.yaml``, its gain map and excluded grades), the first stages run through the candidates
stage's ``retrieve`` with each method's defaults at depth 100 (PISA's indexes built by ``pisa_index.build_index``), the
excluded documents are taken out as the stage does, and ir-measures scores every query with the prepared qrels.
Runs: ``bm25`` (bm25s, Lucene's BM25), ``pisa`` with its default ``analyser: bm25s`` and with ``analyser: pisa``,
and for reference ``bm25s_robertson``: bm25s with the bm25 method's text processing but Robertson's IDF, PISA's
(``--systems`` picks some; bm25 always runs, as every difference is taken from it). Printed: nDCG@10 and R@100 of each (mean over all queries), the difference from bm25, the mean
overlap of each PISA top 100 with bm25's, and query latency. Nothing here is imported by the package.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
MEASURES = ("nDCG@10", "R@100")
SYSTEMS = {
    "bm25": {"method": "bm25"},
    "pisa": {"method": "pisa"},  # analyser: bm25s, the default
    "pisa_own_analyser": {"method": "pisa", "analyser": "pisa"},
    "bm25s_robertson": None,  # not a first-stage method: bm25s's method robertson, computed here
}


def robertson_run(corpus, depth: int) -> tuple[dict, dict]:
    """bm25s with the bm25 method's defaults (k1 0.9, b 0.4, Snowball English, stop words en) and Robertson's IDF."""
    import time

    import bm25s
    import Stemmer

    ids, stemmer = list(corpus.docs), Stemmer.Stemmer("english")
    retriever = bm25s.BM25(k1=0.9, b=0.4, method="robertson")
    retriever.index(bm25s.tokenize(list(corpus.docs.values()), stopwords="en", stemmer=stemmer, show_progress=False))
    qids = sorted(corpus.queries)
    started = time.perf_counter()
    tokens = bm25s.tokenize([corpus.queries[q] for q in qids], stopwords="en", stemmer=stemmer, return_ids=False)
    docs, scores = retriever.retrieve(tokens, k=min(depth, len(ids)), show_progress=False)
    seconds = time.perf_counter() - started
    run = {q: {ids[int(d)]: float(x) for d, x in zip(docs[i], scores[i]) if x > 0} for i, q in enumerate(qids)}
    return run, {"query_ms_per_query": 1000 * seconds / max(1, len(qids))}


def dataset_block(name: str, collection_dir: str | None) -> dict:
    described = yaml.safe_load((REPO / "config" / "datasets" / f"{name}.yaml").read_text(encoding="utf-8"))
    if collection_dir:  # a local collection's three files, from another directory
        for key in ("docs", "queries", "qrels"):
            described[key] = str(Path(collection_dir) / Path(described[key]).name)
    return described


def measure(dataset: dict, work: Path, depth: int = 100, systems=tuple(SYSTEMS)) -> dict:
    import ir_measures

    from longrank.data.corpus import Corpus
    from longrank.data.data import prepare
    from longrank.retrieval import pisa, pisa_index
    from longrank.retrieval.candidates import retrieve, without_excluded

    data = work / "data"
    prepare(dataset, {"method": "full"}, {"method": "holdout", "dev": 0.15, "test": 0.35, "seed": 0}, data)
    corpus = Corpus(data)
    extra = max((len(v) for v in corpus.excluded.values()), default=0)
    runs, costs = {}, {}
    systems = ["bm25", *(name for name in systems if name != "bm25")]
    for name in systems:
        spec = SYSTEMS[name]
        if spec is None:
            ranked, costs[name] = robertson_run(corpus, depth + extra)
            runs[name] = without_excluded(ranked, corpus.excluded, depth)
            continue
        artifacts = []
        if spec["method"] == "pisa":
            settings = pisa.PisaSettings.from_spec(spec, name)
            artifacts = [work / name]
            costs[f"{name} index"] = pisa_index.build_index(data / "docs.jsonl", settings, artifacts[0])
        ranked, costs[name] = retrieve({"name": name, **spec}, corpus, {}, depth=depth + extra, artifacts=artifacts)
        runs[name] = without_excluded(ranked, corpus.excluded, depth)
    qrels = corpus.qrels
    measures = [ir_measures.parse_measure(m) for m in MEASURES]
    out = {"queries": len(corpus.queries), "documents": len(corpus.docs)}
    for method, run in runs.items():
        agg = ir_measures.calc_aggregate(measures, qrels, run)  # queries without candidates count as 0 below
        per_query = {str(m): {} for m in measures}
        for metric in ir_measures.iter_calc(measures, qrels, run):
            per_query[str(metric.measure)][metric.query_id] = metric.value
        judged = [q for q in corpus.queries if q in qrels]
        out[method] = {str(m): sum(per_query[str(m)].get(q, 0.0) for q in judged) / len(judged) for m in measures} | {
            "ir_measures_aggregate": {str(k): v for k, v in agg.items()}
        }
        out[method]["query_ms_per_query"] = costs[method]["query_ms_per_query"]
    for name in systems:
        overlaps = [
            len(set(runs["bm25"].get(q, {})) & set(runs[name].get(q, {}))) / len(runs["bm25"][q])
            for q in corpus.queries
            if runs["bm25"].get(q)
        ]
        out[name]["top100_overlap"] = sum(overlaps) / max(1, len(overlaps))
        if f"{name} index" in costs:
            out[name]["index_seconds"] = costs[f"{name} index"]["index_seconds"]
    return out


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True, help="a description under config/datasets/ (cranfield, irled)")
    parser.add_argument("--collection-dir", help="a local collection's directory holding its three files")
    parser.add_argument("--systems", nargs="+", choices=list(SYSTEMS), default=list(SYSTEMS))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="longrank_agreement_") as work:
        result = measure(dataset_block(args.dataset, args.collection_dir), Path(work), systems=args.systems)
    print(f"{args.dataset}: {result['documents']} documents, {result['queries']} queries (every query, judged ones)")
    print("| system | " + " | ".join(MEASURES) + " | top-100 overlap with bm25 | ms per query |")
    print("|---|" + "---|" * (len(MEASURES) + 2))
    for name in [n for n in SYSTEMS if n in result]:
        cells = [
            f"{result[name][m]:.4f}" + (f" ({result[name][m] - result['bm25'][m]:+.4f})" if name != "bm25" else "")
            for m in MEASURES
        ]
        print(
            f"| {name} | " + " | ".join(cells) + f" | {result[name]['top100_overlap']:.3f} | "
            f"{result[name]['query_ms_per_query']:.2f} |"
        )
    return result


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
