"""Stage ``report``: one self-contained ``index.html`` (+ ``report.md``, tables and PNGs) per dataset.

Everything is read from ``results/{dataset}/``; no number is typed in. A section whose inputs are
absent is kept with a one-line note saying what is missing, so a partial run still gives a report.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import json
import logging
import math
import platform
import shutil
from pathlib import Path

import pandas as pd

from longrank.config import document_budget, model_order
from longrank.evaluate.lengths import (length_distributions, ndcg_by_bucket, query_length_buckets,
                                       read_doc_lengths, region_positions, relevant_median_length,
                                       uniform_region_share)
from longrank.evaluate.metrics import evaluable_queries, per_query, read_eval_tsv, read_folds, test_queries
from longrank.evaluate.significance import compare
from longrank.io import InputError, read_json, read_qrels, read_run, write_text
from longrank.models.registry import constructor_defaults, on_pretrained_encoder
from longrank.report import plots, sanity
from longrank.report.diagnostics import diagnostics_section
from longrank.report.html import Section, render_html, render_markdown
from longrank.report.tables import LETTER_NOTE, Cell, effectiveness_rows, fmt, fmt_p
from longrank.report.verdicts import is_zero_shot, verdict_rows

log = logging.getLogger(__name__)

PRIMARY = "nDCG@10"
PACKAGES = ["torch", "transformers", "bm25s", "ir_datasets", "ir_measures", "pytrec_eval_terrier", "snakemake",
            "scipy", "statsmodels", "numpy", "pandas", "matplotlib"]
COMPARE_FILES = ["table.csv", "pairs.csv", "noninferiority.csv", "table.md", "table.tex"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results", required=True, help="results/{dataset}")
    parser.add_argument("--out-dir", required=True, help="report directory (index.html, report.md, tables, PNGs)")
    parser.add_argument("--eval-dir", default=None, help="per-query evaluations (default: RESULTS/eval)")
    parser.add_argument("--compare-dir", default=None, help="compare outputs (default: RESULTS/compare)")
    parser.add_argument("--length-buckets", type=int, default=4, help="query buckets for nDCG by length (default: 4)")
    parser.add_argument("--title", default=None)


def base_model(system: str) -> str:
    return system.split("+", 1)[0]


def is_reranker(system: str) -> bool:
    return system != "bm25" and "+" not in system


class Inputs:
    """Lazy access to everything under results/{dataset}; missing optional files give None."""

    def __init__(self, results: Path, eval_dir: Path, compare_dir: Path):
        self.root, self.eval_dir, self.compare_dir = results, eval_dir, compare_dir
        self.config = read_json(results / "config.json") if (results / "config.json").exists() else {}
        self.models = self.config.get("models", {}) or {}
        data = results / "data"
        self.qrels = read_qrels(data / "qrels.txt") if (data / "qrels.txt").exists() else None
        self.folds = read_folds(data / "folds.json") if (data / "folds.json").exists() else None
        self.lengths = read_doc_lengths(data / "doc_lengths.tsv") if (data / "doc_lengths.tsv").exists() else None
        self.stats = read_json(data / "stats.json") if (data / "stats.json").exists() else None
        self.test_qids = test_queries(self.folds) if self.folds else None
        self.evaluated_qids = (evaluable_queries(self.qrels, self.test_qids)[0]
                               if self.qrels is not None and self.test_qids is not None else None)
        self._runs: dict[str, dict | None] = {}

    def run(self, system: str):
        if system not in self._runs:
            path = self.root / "runs" / f"{system}.run"
            self._runs[system] = read_run(path) if path.exists() else None
        return self._runs[system]

    def candidates(self):
        path = self.root / "candidates" / "bm25.run"
        return read_run(path) if path.exists() else self.run("bm25")

    def max_doc_len(self, system: str):
        return document_budget(self.models.get(base_model(system)) or {})


def _sweep_key(spec: dict) -> str:
    """What a model entry is besides its maximum length; keys left at the model's default count as unset."""
    defaults = constructor_defaults(spec["type"])
    rest = {k: v for k, v in spec.items()
            if k not in {"max_doc_len", "enabled", "interpolate", "checkpoint_of"} and not (k in defaults and defaults[k] == v)}
    return json.dumps(rest, sort_keys=True, default=str)


def load_comparison(inp: Inputs, bootstrap: int = 2000):
    """compare's outputs when present; else computed here from the eval TSVs (noted in the report)."""
    settings_path = inp.compare_dir / "settings.json"
    if (inp.compare_dir / "table.csv").exists() and (inp.compare_dir / "pairs.csv").exists():
        table = pd.read_csv(inp.compare_dir / "table.csv", keep_default_na=False, na_values=[""])
        table["better_than"] = table["better_than"].fillna("").astype(str)
        pairs = pd.read_csv(inp.compare_dir / "pairs.csv")
        ni_path = inp.compare_dir / "noninferiority.csv"
        ni = pd.read_csv(ni_path) if ni_path.exists() else None
        settings = read_json(settings_path) if settings_path.exists() else {}
        systems = settings.get("systems") or list(dict.fromkeys(table["system"]))
        settings.setdefault("alpha", 0.05)
        frames = {s: read_eval_tsv(inp.eval_dir / f"{s}.tsv") for s in systems if (inp.eval_dir / f"{s}.tsv").exists()}
        return systems, table, pairs, ni, settings, frames, None
    tsvs = sorted(inp.eval_dir.glob("*.tsv")) if inp.eval_dir.exists() else []
    if not tsvs:
        return None
    names = [p.stem for p in tsvs]
    systems = (["bm25"] if "bm25" in names else []) + [n for n in names if n != "bm25"]
    frames = {s: read_eval_tsv(inp.eval_dir / f"{s}.tsv") for s in systems}
    out = compare(frames, n_resamples=bootstrap, seed=0)
    settings = {"systems": systems, "alpha": 0.05, "bootstrap": bootstrap, "seed": 0,
                "n_queries": int(out["table"]["n_queries"].iloc[0])}
    note = (f"No compare outputs in {inp.compare_dir}: the table below was computed by the report from "
            f"{inp.eval_dir} ({bootstrap} bootstrap resamples, alpha 0.05, no non-inferiority reference).")
    return systems, out["table"], out["pairs"], None, settings, frames, note


def docs_per_ms(inp: Inputs) -> tuple[dict[str, float], list[tuple[str, dict]]]:
    rates: dict[str, float] = {}
    benches = []
    bench_dir = inp.root / "bench"
    for path in sorted(bench_dir.glob("*.json")) if bench_dir.exists() else []:
        try:
            b = read_json(path)
        except ValueError as err:
            raise InputError(f"{path}: not valid JSON ({err})") from None
        benches.append((path.stem, b))
        for name, v in (b.get("docs_per_ms") or {}).items():
            rates[name] = float(v)
    return rates, benches


def is_fine_tuned_encoder(spec: dict | None) -> bool:
    """A model on a pretrained WordPiece encoder whose weights were trained here (its own or ``checkpoint_of``'s)."""
    return bool(spec) and "type" in spec and on_pretrained_encoder(spec["type"]) and not is_zero_shot(spec)


def training_section(inp: Inputs, frames: dict[str, pd.DataFrame], fig_dir: Path) -> Section:
    """How each model trained: where early stopping kept it, and whether its dev gain over an untrained
    reference (the zero-shot floor, BM25) carried over to the test queries. On small collections the dev
    queries that pick the kept step are few, and this is where a fine-tuned row's shortfall shows."""
    sec = Section("Training: dev curves and early stopping")
    if inp.folds is None or inp.qrels is None:
        return sec.note("Skipped: needs data/folds.json and data/qrels.txt.")
    from longrank.scoring import mean_measure

    trained = [m for m in model_order(inp.models) if not inp.models[m].get("checkpoint_of")]
    floors = [m for m in trained if is_zero_shot(inp.models[m])]
    candidates = inp.candidates()
    rows, curves = [], {}
    for fold_index, fold in enumerate(inp.folds):
        dev_refs = {f: read_json(p)["best_dev_ndcg10"] for f in floors
                    if (p := inp.root / "models" / f / f"fold{fold_index}" / "train_summary.json").exists()}
        if candidates is not None:
            dev_refs = {"bm25": mean_measure(candidates, inp.qrels, fold["dev"]), **dev_refs}

        def test_mean(system: str):
            frame = frames.get(system)
            qids = [q for q in fold["test"] if frame is not None and q in frame.index]
            return float(frame.loc[qids, PRIMARY].mean()) if qids and PRIMARY in frame.columns else None

        floor = floors[0] if floors else None
        floor_dev, floor_test = dev_refs.get(floor), test_mean(floor) if floor else None
        for model in trained:
            if model in floors:
                continue
            summary_path = inp.root / "models" / model / f"fold{fold_index}" / "train_summary.json"
            if not summary_path.exists():
                continue
            summary = read_json(summary_path)
            test = test_mean(model)
            rows.append([model, fold_index, summary.get("steps_run", "–"), summary.get("best_step", "–"),
                         Cell(fmt(summary["best_dev_ndcg10"])),
                         Cell(f"{summary['best_dev_ndcg10'] - floor_dev:+.4f}" if floor_dev is not None else "–"),
                         Cell(fmt(test) if test is not None else "–"),
                         Cell(f"{test - floor_test:+.4f}" if test is not None and floor_test is not None else "–"),
                         Cell(fmt(summary.get("seconds"), 0) if summary.get("seconds") is not None else "–")])
            log_path = summary_path.with_name("training_log.tsv")
            if fold_index == 0 and log_path.exists():
                log = pd.read_csv(log_path, sep="\t")
                if len(log):
                    curves[model] = log
        if fold_index == 0 and curves:
            png = plots.training_plot(curves, fig_dir / "fig_training.png", dev_refs, PRIMARY)
            sec.image(png, f"Dev {PRIMARY} during training (fold 0), against the untrained references' dev scores.")
    if not rows:
        return sec.note("Skipped: no models/*/fold*/train_summary.json of a trained model.")
    vs = f" vs {floors[0]}" if floors else ""
    sec.howto(f"Training keeps the weights with the best dev {PRIMARY} and stops after `patience` evaluations without "
              f"improvement. The Δ columns compare with the zero-shot floor ({floors[0] if floors else 'none configured'}) "
              "on the same fold's dev and test queries: a dev gain that does not reappear on test was chosen on noise "
              "(few dev queries) or is overfitting.")
    sec.table(["Model", "Fold", "Steps run", "Best step", f"Best dev {PRIMARY}", f"Δ dev{vs}", f"Test {PRIMARY}",
               f"Δ test{vs}", "Seconds"], rows)
    return sec


def build(results: Path, out_dir: Path, eval_dir: Path | None = None, compare_dir: Path | None = None,
          n_length_buckets: int = 4, title: str | None = None) -> list[Section]:
    results, out_dir = Path(results), Path(out_dir)
    if not results.is_dir():
        raise InputError(f"results directory {results} does not exist")
    inp = Inputs(results, Path(eval_dir or results / "eval"), Path(compare_dir or results / "compare"))
    out_dir.mkdir(parents=True, exist_ok=True)
    fig_dir = out_dir / "figures"  # one folder, so the workflow can declare the figures that exist
    fig_dir.mkdir(exist_ok=True)
    dataset = inp.config.get("dataset", {}).get("name") if isinstance(inp.config.get("dataset"), dict) else inp.config.get("dataset")
    title = title or f"LongRank report: {dataset or results.name}"
    sections: list[Section] = []
    rates, benches = docs_per_ms(inp)

    # 1. effectiveness ---------------------------------------------------------------------------------
    sec = Section("Effectiveness")
    sections.append(sec)
    cmp = load_comparison(inp)
    systems, table, pairs, ni, settings, frames = [], None, None, None, {}, {}
    if cmp is None:
        sec.note(f"No per-query evaluations found in {inp.eval_dir}: run the evaluate and compare stages first.")
    else:
        systems, table, pairs, ni, settings, frames, note = cmp
        letters = dict(zip(table["system"], table["letter"]))
        measures = list(dict.fromkeys(table["measure"]))
        primary = PRIMARY if PRIMARY in measures else measures[0]
        alpha = settings.get("alpha", 0.05)
        if note:
            sec.note(note)
        extra_cols = ["Max doc len"] + (["Docs/ms"] if rates else [])
        extra = {s: {"Max doc len": inp.max_doc_len(s) or "–", "Docs/ms": fmt(rates[s], 2) if s in rates else "–"}
                 for s in systems}
        weights, expected = sanity.interpolation_weights(inp), sanity.random_order(inp)
        extra_cols += sanity.weight_column(weights, extra)  # "w (dev)" beside every model+bm25 row
        headers, rows = effectiveness_rows(table, systems, measures, extra, extra_cols)
        rows += sanity.random_order_rows(inp, expected, headers, measures, primary)  # reference rows: the nDCG@10 column only
        sec.howto(LETTER_NOTE.format(alpha=alpha) + " Confidence intervals are percentile bootstrap 95% intervals "
                  f"over queries ({settings.get('bootstrap', '?')} resamples, seed {settings.get('seed', '?')}). "
                  f"All systems are evaluated on the same {settings.get('n_queries', '?')} test queries. " + sanity.reference_note(inp))
        sec.table(headers, rows)
        if "bm25" in systems:
            lines = verdict_rows(pairs, primary, [(s, "bm25") for s in systems if s != "bm25"], "BM25", alpha,
                                 sanity.zero_weight_verdicts(weights, sanity.first_stage(inp).upper()))
            sec.table(["System", f"vs BM25 on {primary}", "Mean difference", "p (Wilcoxon, Holm)"], lines,
                      caption=f"Each system against BM25 ({primary})")
        # Each fine-tuned encoder row against the untrained encoder it starts from, interpolated against interpolated.
        tuned = [s for s in systems if is_fine_tuned_encoder(inp.models.get(base_model(s)))]
        for floor in [s for s in systems if is_zero_shot(inp.models.get(s))]:
            lines = verdict_rows(pairs, primary, [(s, floor + s[len(base_model(s)):]) for s in tuned], f"the {floor} floor", alpha)
            if lines:
                sec.table(["System", f"vs {floor} on {primary}", "Mean difference", "p (Wilcoxon, Holm)"], lines,
                          caption=f"Fine-tuned encoders against the zero-shot floor {floor} ({primary}; +bm25 rows against {floor}+bm25)")
        sec.table(*sanity.sanity_table(inp, table, pairs, systems, primary, alpha, expected),
                  caption=f"Trained rerankers against the sanity references ({primary})")
        detail = []
        for _, r in pairs[pairs.measure == primary].iterrows():
            detail.append([f"{r.system_a} − {r.system_b}", Cell(f"{r.mean_diff:+.4f}"),
                           Cell(f"[{r.diff_ci_low:+.4f}, {r.diff_ci_high:+.4f}]"), Cell(fmt(float(r.cohens_d), 2)),
                           Cell(fmt_p(r.wilcoxon_p)), Cell(fmt_p(r.wilcoxon_p_holm)), Cell(fmt_p(r.ttest_p)),
                           Cell(fmt_p(r.ttest_p_holm))])
        sec.table(["Pair", "Mean diff", "95% CI", "Cohen's d", "Wilcoxon p", "Wilcoxon p (Holm)", "t-test p",
                   "t-test p (Holm)"], detail, caption=f"Pairwise differences on {primary}")
        for name in COMPARE_FILES:
            if (inp.compare_dir / name).exists():
                shutil.copyfile(inp.compare_dir / name, out_dir / name)
        if note:  # computed here: still leave the csv tables beside the report
            table.to_csv(out_dir / "table.csv", index=False, float_format="%.6g")
            pairs.to_csv(out_dir / "pairs.csv", index=False, float_format="%.6g")

    # 2. first-stage recall ----------------------------------------------------------------------------
    sec = Section("First-stage candidate recall")
    sections.append(sec)
    cands = inp.candidates()
    if cands is None or inp.qrels is None or inp.evaluated_qids is None:
        sec.note("Skipped: needs candidates/bm25.run (or runs/bm25.run), data/qrels.txt and data/folds.json.")
    else:
        depth = max((len(d) for d in cands.values()), default=0)
        k = int((inp.config.get("first_stage") or {}).get("top_k") or depth)
        cutoffs = sorted({c for c in (10, 100, 1000) if c < k} | {k})
        recall = per_query(cands, inp.qrels, inp.test_qids, [f"R@{c}" for c in cutoffs], name="bm25 candidates")
        sec.text(f"Recall of the BM25 candidates over the {len(recall)} test queries: a re-ranker can only "
                 f"find relevant documents among the top {k} that BM25 hands it (R@{k} is its ceiling).")
        sec.table(["First stage", *recall.columns], [["bm25", *[float(recall[c].mean()) for c in recall.columns]]])

    sections.append(diagnostics_section(inp, systems))  # what each reranker's scores follow

    # 3. CIs ---------------------------------------------------------------------------------------------
    sec = Section(f"{PRIMARY} with bootstrap 95% confidence intervals")
    sections.append(sec)
    if table is None or PRIMARY not in set(table["measure"]):
        sec.note(f"Skipped: no {PRIMARY} in the comparison table.")
    else:
        png = plots.ci_plot(table, PRIMARY, systems, fig_dir / "fig_ci_ndcg10.png", letters)
        sec.image(png, f"Mean {PRIMARY} per system; bars are percentile bootstrap 95% CIs over test queries. "
                       "Overlapping intervals do not imply a non-significant paired difference: see the pairwise table.")

    # 4. nDCG by length bucket -----------------------------------------------------------------------------
    sec = Section(f"{PRIMARY} by document-length bucket")
    sections.append(sec)
    if not frames or inp.lengths is None or inp.qrels is None or PRIMARY not in next(iter(frames.values())).columns:
        sec.note("Skipped: needs eval TSVs with nDCG@10, data/doc_lengths.tsv and data/qrels.txt.")
    else:
        qids = list(next(iter(frames.values())).index)
        med = relevant_median_length(inp.qrels, inp.lengths, qids)
        buckets = query_length_buckets(med, n_length_buckets)
        by_bucket = ndcg_by_bucket(frames, buckets, PRIMARY)
        png = plots.length_bucket_plot(by_bucket, list(frames), fig_dir / "fig_length_buckets.png", PRIMARY)
        sec.text("Test queries are split into quantile buckets by the median length (words) of their relevant "
                 "documents; bars are each system's mean nDCG@10 within a bucket.")
        sec.image(png, f"{PRIMARY} by median relevant-document length (TKL Fig. 2 style).")
        sec.table(["Bucket (words)", "Queries", *frames], [[str(b), int(r["queries"]), *[float(r[s]) for s in frames]]
                                                          for b, r in by_bucket.iterrows()])

    # 5. length bias --------------------------------------------------------------------------------------
    sec = Section("Probability of relevance vs retrieval by document length")
    sections.append(sec)
    rerankers = [s for s in systems if is_reranker(s) and inp.run(s) is not None]
    if not rerankers or inp.lengths is None or inp.qrels is None or cands is None or inp.evaluated_qids is None:
        sec.note("Skipped: needs re-ranker runs, candidates, data/doc_lengths.tsv and data/qrels.txt.")
    else:
        runs = {s: inp.run(s) for s in rerankers}
        if inp.run("bm25") is not None:
            runs["bm25"] = inp.run("bm25")
        # TKL's Fig. 1 looks at the top 30 of 100 reranked candidates. A model that reranks only its top n
        # leaves the set of its top n unchanged, so look at most at half the shallowest rerank depth.
        depths = [(inp.models.get(s) or {}).get("rerank_depth") or inp.config.get("rerank_depth") or 100 for s in rerankers]
        depth = max(1, min(30, min(depths) // 2))
        dist = length_distributions(cands, inp.qrels, runs, inp.lengths, inp.evaluated_qids, depth=depth)
        png = plots.length_bias_plot(dist, rerankers, fig_dir / "fig_length_bias.png", depth=depth)
        sec.text("Length buckets are deciles of the collection's document lengths (equal numbers of documents), so "
                 "the share of relevant candidates in a bucket is proportional to P(rel | length) and the share of a "
                 f"model's top-{depth} documents to P(ret@{depth} | length). A retrieval curve below the relevance curve on the "
                 f"right means the model under-retrieves long documents. (Top {depth}: half the shallowest rerank depth, "
                 "since reranking the top n cannot change which documents are in it.)")
        sec.image(png, f"Relevance vs retrieval (top {depth}) by document length, per re-ranker (TKL Fig. 1 style).")

    # 6. max doc length -------------------------------------------------------------------------------------
    sec = Section(f"{PRIMARY} vs maximum document length")
    sections.append(sec)
    pts = []
    if table is not None:
        prim = table[table.measure == PRIMARY].set_index("system")
        for s in systems:
            spec = inp.models.get(s) or {}
            if is_reranker(s) and s in prim.index and spec.get("max_doc_len") and spec.get("type"):
                pts.append({"type": spec["type"], "system": s, "max_doc_len": int(spec["max_doc_len"]),
                            "mean": prim.loc[s, "mean"], "ci_low": prim.loc[s, "ci_low"], "ci_high": prim.loc[s, "ci_high"]})
    pts = pd.DataFrame(pts, columns=["type", "system", "max_doc_len", "mean", "ci_low", "ci_high"])
    # One line per sweep: entries that differ in max_doc_len only (not saturation, training, depth, ...).
    pts["sweep"] = [_sweep_key(inp.models[s]) for s in pts["system"]]
    lengths = pts.groupby("sweep")["max_doc_len"].nunique() if len(pts) else pd.Series(dtype=int)
    pts = pts[pts["sweep"].isin(lengths[lengths >= 2].index)].copy()
    per_type = pts.groupby("type")["sweep"].nunique()
    pts["type"] = [t if per_type[t] == 1 else f"{t} ({pts[pts.sweep == k].system.iloc[0]} ...)" for t, k in zip(pts["type"], pts["sweep"])]
    if pts.empty:
        sec.note("Skipped: no two models in config.json differ in max_doc_len only.")
    else:
        base = float(prim.loc["bm25", "mean"]) if "bm25" in prim.index else None
        png = plots.maxlen_plot(pts, fig_dir / "fig_maxlen.png", PRIMARY, base)
        sec.image(png, f"{PRIMARY} against the number of document tokens the model reads (TKL Fig. 2 style).")

    # 7. region positions ------------------------------------------------------------------------------------
    sec = Section("Positions of the top-3 regions (TKL)")
    sections.append(sec)
    # Every rerank writes a details file; only models that explain their scores (TKL) fill it.
    details = [p for p in sorted((results / "runs").glob("*.details.jsonl")) if p.stat().st_size > 0] if (results / "runs").exists() else []
    if not details:
        sec.note("Skipped: no runs/*.details.jsonl (region positions are written by TKL reranking).")
    else:
        positions = {}
        for path in details:
            model = path.name[: -len(".details.jsonl")]
            positions[model] = region_positions(path, inp.run(model), inp.evaluated_qids, top_docs=10)
        png = plots.region_plot(positions, fig_dir / "fig_regions.png")
        sec.image(png, "Start offsets of the rank-1, -2 and -3 regions over each test query's top-10 documents "
                       "(log-log; dotted line at token 500).")
        rows = []
        for model, pos in positions.items():
            spec = inp.models.get(model) or {}
            uniform = None
            if inp.lengths is not None and spec.get("max_doc_len") and spec.get("type"):
                region_size = spec.get("region_size", constructor_defaults(spec["type"]).get("region_size", 1))
                uniform = uniform_region_share(inp.run(model), inp.evaluated_qids, inp.lengths, int(spec["max_doc_len"]),
                                               int(region_size))
            for r, ps in sorted(pos.items()):
                share = sum(p >= 500 for p in ps) / len(ps) if ps else float("nan")
                rows.append([model, f"rank-{r}", len(ps), Cell(f"{100 * share:.1f}%" if ps else "–"),
                             Cell("–" if uniform is None or math.isnan(uniform) else f"{100 * uniform:.1f}%")])
        sec.table(["Model", "Region", "Regions", "Starting at token ≥ 500", "Same, if regions were placed uniformly"], rows)
        sec.note("The last column is the share a region placed at random in the part of each document the model "
                 "reads would have: on a collection of long documents most of the text lies beyond token 500, so "
                 "compare the two columns rather than reading the first alone.")

    # 8. efficiency ------------------------------------------------------------------------------------------
    sec = Section("Efficiency")
    sections.append(sec)
    if not benches:
        sec.note("Skipped: no bench/*.json.")
    for name, b in benches:
        cols = list(b.get("columns") or [])
        rows = [[Cell(fmt(v, 3) if isinstance(v, float) else ("" if v is None else str(v))) for v in row]
                for row in b.get("rows") or []]
        if cols and rows:
            sec.table(cols, rows, caption=b.get("title") or name)
        if b.get("notes"):
            sec.note(str(b["notes"]))
    if rates and table is not None and PRIMARY in set(table["measure"]):
        prim = table[table.measure == PRIMARY].set_index("system")
        eff = pd.DataFrame([{"system": s, "docs_per_ms": v, "mean": float(prim.loc[s, "mean"])}
                            for s, v in rates.items() if s in prim.index])
        if len(eff):
            png = plots.efficiency_plot(eff, fig_dir / "fig_efficiency.png", PRIMARY)
            sec.image(png, f"{PRIMARY} against throughput (documents re-ranked per millisecond; MIR Fig. 5 style).")

    # 9. non-inferiority --------------------------------------------------------------------------------------
    sec = Section("Non-inferiority")
    sections.append(sec)
    if ni is None or ni.empty:
        sec.note("Skipped: compare was run without --reference, so no non-inferiority test.")
    else:
        ref = ni["reference"].iloc[0]
        sec.howto(f"MORES-style test (Gao et al. 2020, §4.1): for margin δ (a fraction of {ref}'s mean), a one-sided "
                  f"paired t-test rejects H0: mean(system) − mean({ref}) ≤ −δ·mean({ref}). ✓ = non-inferior "
                  f"(p < {settings.get('alpha', 0.05)}): any loss against {ref} is smaller than the margin.")
        ni_measures = list(dict.fromkeys(ni["measure"]))
        rows = []
        for (s, margin), grp in ni.groupby(["system", "margin"], sort=False):
            g = grp.set_index("measure")
            rows.append([s, f"{100 * margin:g}%", *[Cell(("✓ " if g.loc[m, "verdict"] == "non-inferior" else "✗ ")
                                                         + f"p={fmt_p(float(g.loc[m, 'p']))}") for m in ni_measures]])
        sec.table(["System", "Margin", *ni_measures], rows, caption=f"Non-inferiority to {ref}")

    # 10. interpolation -------------------------------------------------------------------------------------
    sec = Section("Interpolation with BM25 (weights chosen on dev queries)")
    sections.append(sec)
    interp = sorted((results / "runs").glob("*.interpolation.json")) if (results / "runs").exists() else []
    if not interp:
        sec.note("Skipped: no runs/*.interpolation.json.")
    else:
        rows = []
        for path in interp:
            info = read_json(path)
            by_w = info.get("dev_ndcg10_by_weight") or {}
            w = info.get("weight")
            best = by_w.get(str(w), by_w.get(w)) if by_w else None
            rows.append([path.name[: -len(".interpolation.json")], Cell(fmt(float(w), 3) if w is not None else "–"),
                         Cell(fmt(float(best)) if best is not None else "–"), len(by_w)])
        sec.text("score = w · model + (1 − w) · BM25 (as implemented by the rerank stage); w maximises dev nDCG@10.")
        sec.table(["Model", "Weight w", "Dev nDCG@10 at w", "Weights tried"], rows)

    # 11. training ------------------------------------------------------------------------------------------
    sections.append(training_section(inp, frames, fig_dir))

    # 12. provenance ------------------------------------------------------------------------------------------
    sec = Section("Provenance")
    sections.append(sec)
    versions = [["python", platform.python_version()]]
    for pkg in PACKAGES:
        try:
            versions.append([pkg, importlib.metadata.version(pkg)])
        except importlib.metadata.PackageNotFoundError:
            versions.append([pkg, "not installed"])
    sec.text(f"Generated {dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} from {results}.")
    if inp.stats:
        dw = inp.stats.get("doc_words") or {}
        sec.text(f"Collection: {inp.stats.get('num_docs', '?')} documents, {inp.stats.get('num_queries', '?')} queries; "
                 f"document words mean {fmt(dw.get('mean'), 1) if dw.get('mean') is not None else '?'}, "
                 f"median {dw.get('median', '?')}, p90 {dw.get('p90', '?')}, max {dw.get('max', '?')}.")
    sec.table(["Package", "Version"], versions)
    if inp.config:
        sec.code(json.dumps(inp.config, indent=2, sort_keys=True))
    else:
        sec.note("No config.json found in the results directory.")

    write_text(out_dir / "index.html", render_html(title, sections))
    write_text(out_dir / "report.md", render_markdown(title, sections))
    return sections


def run(args: argparse.Namespace) -> None:
    sections = build(Path(args.results), Path(args.out_dir), args.eval_dir and Path(args.eval_dir),
                     args.compare_dir and Path(args.compare_dir), args.length_buckets, args.title)
    skipped = [s.title for s in sections if s.blocks and all(b.kind == "note" for b in s.blocks)]
    log.info("report written to %s (%d sections%s)", args.out_dir, len(sections),
             f"; skipped: {', '.join(skipped)}" if skipped else "")
