"""The learnability study's table and learning curve (docs/studies/learnability.md): nDCG@10 on the test queries of
each model at each training-set size, beside BM25 and a random order of BM25's top 10 and top 20, read from the runs'
files (the per-query ``results/learnability/eval/<system>.tsv``, ``data/``, ``candidates/bm25.run``), never typed in.

    python benchmarks/learnability_curve.py --run 100=/tmp/learn/w100 --run 3000=/tmp/learn/w3000 --out docs/studies/learnability

writes ``<out>.tsv`` and ``<out>.png``, and prints the Markdown table."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from scipy.stats import wilcoxon

from longrank.io.trec_files import read_qrels, read_run
from longrank.report.sanity_references import expected_random_ndcg
from longrank.runs import top_candidates
from longrank.tables import read_table

MODELS = ["knrm", "tk", "tkl", "ndrm3", "ndrm3_glove", "bert_firstp"]
NAMES = {
    "knrm": "KNRM",
    "tk": "TK",
    "tkl": "TKL",
    "ndrm3": "NDRM3",
    "ndrm3_glove": "NDRM3 on GloVe",
    "bert_firstp": "BERT FirstP (MiniLM)",
}


def random_order(results: Path, k: int) -> float:
    """The exact expected nDCG@10 of a random order of BM25's top k, over the test queries."""
    test = json.loads((results / "data" / "folds.json").read_text())[0]["test"]
    qrels = read_qrels(results / "data" / "qrels.txt")
    run = read_run(results / "candidates" / "bm25.run")
    values = [expected_random_ndcg(top_candidates(run, q, 100), qrels.get(q, {}), k) for q in test]
    return sum(values) / len(values)


def cell(value: dict, pvalue: dict, size: int, system: str) -> str:
    """The mean, and where the system is not BM25 or a random order, its p against BM25 (bold under 0.05)."""
    if (size, system) not in value:
        return "(not run)"
    text = f"{value[(size, system)]:.3f}"
    p = pvalue[(size, system)]
    if system != "bm25" and p == p:
        text += f" (p {p:.2g})"
        if p < 0.05:
            text = f"**{text}**"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", action="append", required=True, help="SIZE=WORKDIR of one training-set size")
    parser.add_argument("--out", required=True, help="path without suffix for the .tsv and .png")
    args = parser.parse_args()
    sizes = {int(s): Path(w) / "results" / "learnability" for s, w in (r.split("=", 1) for r in args.run)}
    rows = []  # size, system, mean nDCG@10, test queries, Wilcoxon p against BM25 (two-sided, paired, uncorrected)
    for size, results in sorted(sizes.items()):
        bm25 = read_table(results / "eval" / "bm25.tsv", sep="\t").set_index("query_id")["nDCG@10"]
        for system in ["bm25", "query_term_matches", *MODELS, *(f"{m}+bm25" for m in MODELS)]:
            path = results / "eval" / f"{system}.tsv"
            if path.exists():  # a system not run at this size is left out
                values = read_table(path, sep="\t").set_index("query_id")["nDCG@10"]
                differ = (values - bm25.loc[values.index]).abs().sum() > 0
                p = float(wilcoxon(values, bm25.loc[values.index]).pvalue) if differ else 1.0
                rows.append((size, system, float(values.mean()), len(values), p))
        for k in (10, 20):
            rows.append((size, f"random_top{k}", random_order(results, k), rows[0][3], float("nan")))
    out = Path(args.out)
    out.with_suffix(".tsv").write_text(
        "training_queries\tsystem\tnDCG@10\ttest_queries\twilcoxon_p_vs_bm25\n"
        + "".join(f"{s}\t{n}\t{m:.4f}\t{q}\t{p:.2g}\n" for s, n, m, q, p in rows)
    )
    value = {(s, n): m for s, n, m, _, _ in rows}
    pvalue = {(s, n): p for s, n, _, _, p in rows}
    ordered = sorted(sizes)
    print("| system | " + " | ".join(f"{s:,} queries" for s in ordered) + " |")
    print("|---|" + "---|" * len(ordered))
    for system in [
        "bm25",
        "random_top10",
        "random_top20",
        "query_term_matches",
        *MODELS,
        *(f"{m}+bm25" for m in MODELS),
    ]:
        cells = [cell(value, pvalue, s, system) for s in ordered]
        print(f"| {system} | " + " | ".join(cells) + " |")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    for model in MODELS:
        xs = [s for s in ordered if (s, model) in value]
        ax.plot(xs, [value[(s, model)] for s in xs], marker="o", label=NAMES[model])
    for system, style, label in (("bm25", "k--", "BM25"), ("random_top10", "k:", "random order of BM25's top 10")):
        ax.plot(ordered, [value[(s, system)] for s in ordered], style, label=label)
    ax.set_xscale("log")
    ax.set_xticks(ordered, [f"{s:,}" for s in ordered])
    ax.set_xlabel("training queries")
    ax.set_ylabel("nDCG@10 (100 test queries)")
    ax.set_title("Learnability: relevance in words no query has")
    ax.legend(fontsize=7, loc="lower right", ncol=2)
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"))


if __name__ == "__main__":
    main()
