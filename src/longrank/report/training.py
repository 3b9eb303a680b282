"""Section: how each model trained, where early stopping kept it, and whether its dev gain over an untrained
reference (the zero-shot floor, the first stages) carried over to the test queries. On small collections the
dev queries that pick the kept step are few, and this is where a fine-tuned row's shortfall shows."""

from __future__ import annotations

from pathlib import Path


from longrank.io.json_yaml import read_json
from longrank.results.stage_outputs import TrainSummary
from longrank.report import plots
from longrank.report.context import Context
from longrank.report.html import Section
from longrank.report.inputs import PRIMARY, no_model_reason
from longrank.config.model_entries import is_zero_shot
from longrank.report.verdicts import pair_row, verdict
from longrank.runs import mean_measure
from longrank.tables import Cell, fmt, fmt_p, read_table


def section(ctx: Context) -> Section:
    inp = ctx.inp
    sec = Section("Training: dev curves and early stopping")
    summaries = {m: [TrainSummary.read(p) for p in paths] for m, paths in inp.manifest.training.items()}
    trained = list(inp.manifest.training)  # the models that train their own weights, in the workflow's order
    floors = [m for m in trained if is_zero_shot(inp.models[m])]
    stages = {s: c for s in inp.first_stages if (c := inp.candidates(s)) is not None}
    rows = []
    for fold_index, fold in enumerate(inp.folds):
        dev_refs = {s: mean_measure(c, inp.qrels, fold["dev"]) for s, c in stages.items()}
        dev_refs.update({f: summaries[f][fold_index].best_dev_ndcg10 for f in floors if f in summaries})
        rows += _fold_rows(ctx, fold_index, fold, summaries, trained, floors, dev_refs)
        if fold_index == 0:
            _dev_curves(ctx, sec, [m for m in trained if m not in floors and m in summaries], dev_refs)
    if not rows:
        return sec.not_run(
            no_model_reason(inp, "trains")
            if not inp.models
            else "no enabled model trains weights of its own: " + "; ".join(map(untrained_reason, inp.models.items()))
        )
    _pretraining(ctx, sec, trained)
    vs = f" vs {floors[0]}" if floors else ""
    sec.howto(
        f"Training keeps the weights with the best dev {PRIMARY} and stops after `patience` evaluations without "
        f"improvement. The Δ columns compare with the zero-shot floor ({floors[0] if floors else 'none configured'}) "
        "on the same fold's dev and test queries: a dev gain that does not reappear on test was chosen on noise "
        "(few dev queries) or is overfitting."
    )
    sec.table(
        [
            "Model",
            "Fold",
            "Steps run",
            "Best step",
            f"Best dev {PRIMARY}",
            f"Δ dev{vs}",
            f"Test {PRIMARY}",
            f"Δ test{vs}",
            "Training time (s)",
        ],
        rows,
    )
    return sec


def untrained_reason(item: tuple[str, dict]) -> str:
    """Why an enabled entry has no training row: the config key that says so."""
    name, spec = item
    if spec.get("checkpoint_of"):
        return f"{name} has checkpoint_of: {spec['checkpoint_of']}"
    if is_zero_shot(spec):
        return f"{name} has train.steps: 0 (zero-shot)"
    return f"{name} has no training summary among the report's inputs"


def _fold_rows(
    ctx: Context, fold_index: int, fold: dict, summaries: dict, trained: list[str], floors: list[str], dev_refs: dict
) -> list[list]:
    """One row per trained model (not a floor) of one fold: where it stopped and its dev and test gains over the
    zero-shot floor."""
    frames = ctx.cmp.frames

    def test_mean(system: str):
        frame = frames.get(system)
        if frame is None:
            return None
        qids = [q for q in fold["test"] if q in frame.index]
        return float(frame.loc[qids, PRIMARY].mean()) if qids and PRIMARY in frame.columns else None

    floor = floors[0] if floors else None
    floor_dev, floor_test = dev_refs.get(floor), test_mean(floor) if floor else None
    rows = []
    for model in trained:
        if model in floors:
            continue
        if model not in summaries:
            continue
        summary = summaries[model][fold_index]
        test = test_mean(model)
        rows.append(
            [
                model,
                fold_index,
                summary.steps_run,
                summary.best_step,
                Cell(fmt(summary.best_dev_ndcg10)),
                Cell(f"{summary.best_dev_ndcg10 - floor_dev:+.4f}" if floor_dev is not None else "–"),
                Cell(fmt(test) if test is not None else "–"),
                Cell(f"{test - floor_test:+.4f}" if test is not None and floor_test is not None else "–"),
                Cell(train_time(summary)),
            ]
        )
    return rows


def train_time(summary: TrainSummary) -> str:
    """Seconds of one training run and its seconds per step (dev evaluations included); a run is timed once, so
    the cell says "1 run" rather than give a spread it does not have."""
    if summary.seconds is None:
        return "–"
    per_step = f", {summary.seconds / summary.steps_run:#.2g} s/step" if summary.steps_run else ""
    seconds = f"{summary.seconds:,.0f}" if summary.seconds >= 10 else f"{summary.seconds:#.2g}"
    return f"{seconds} (1 run{per_step})"


def _dev_curves(ctx: Context, sec: Section, models: list[str], dev_refs: dict) -> None:
    """Fold 0's dev curves of ``models`` (those with a non-empty training log), against the references' dev scores."""
    curves = {}
    for model in models:
        log_path = Path(ctx.inp.manifest.training[model][0]).with_name("training_log.tsv")
        if log_path.exists():
            log = read_table(log_path, sep="\t")
            if len(log):
                curves[model] = log
    if curves:
        png = plots.training_plot(curves, ctx.fig_dir / "fig_training.png", dev_refs, PRIMARY)
        sec.image(png, f"Dev {PRIMARY} during training (fold 0), against the untrained references' dev scores.")


def _pretraining(ctx: Context, sec: Section, trained: list[str]) -> None:
    """Models with ``train.pretrain``: the pre-training on pseudo-queries (one run for all folds), its curve on the
    held-out pseudo-queries, and what the supervised training then started from."""
    rows, curves = _pretraining_rows(ctx.inp, trained)
    if not rows:
        return
    sec.howto(
        "Pre-training (`train.pretrain`): each model first trains on pseudo-queries made from the documents alone "
        "(`pseudo_queries`: titles, the Inverse Cloze Task, or the collection's query formulation applied to a "
        "passage; the positive is the document without the text the query came from), early-stopped on held-out "
        f"pseudo-queries, and its supervised training above starts from the kept weights. The pseudo-dev {PRIMARY} "
        "says how well the pseudo task was learnt, not how well real queries are answered."
    )
    sec.table(
        [
            "Model",
            "Pseudo-queries",
            "Source",
            "Train",
            "Held out",
            "Steps run",
            "Best step",
            f"Best pseudo-dev {PRIMARY}",
            "Training time (s)",
        ],
        rows,
    )
    if curves:
        png = plots.training_plot(curves, ctx.fig_dir / "fig_pretraining.png", {}, PRIMARY, dev="pseudo-dev")
        sec.image(png, f"Held-out pseudo-queries' {PRIMARY} during pre-training.")
    _pretraining_effect(ctx, sec, trained)


def _pretraining_rows(inp, trained: list[str]) -> tuple[list[list], dict]:
    """Per pre-trained model: its pseudo-query set, where its pre-training stopped, and its curve."""
    rows, curves = [], {}
    for model in trained:
        pretrain = (inp.models[model].get("train") or {}).get("pretrain")
        if not pretrain or model not in inp.manifest.pretraining:
            continue
        path = Path(inp.manifest.pretraining[model])
        summary = TrainSummary.read(path)
        stats = read_json(Path(inp.manifest.pseudo_queries[pretrain["queries"]]) / "stats.json")
        rows.append(
            [
                model,
                pretrain["queries"],
                stats["source"],
                stats["train"],
                stats["dev"],
                summary.steps_run,
                summary.best_step,
                Cell(fmt(summary.best_dev_ndcg10)),
                Cell(train_time(summary)),
            ]
        )
        log_path = path.with_name("training_log.tsv")
        if log_path.exists() and len(log := read_table(log_path, sep="\t")):
            curves[model] = log
    return rows, curves


def _pretraining_effect(ctx: Context, sec: Section, trained: list[str]) -> None:
    """Each pre-trained model against the configured model that differs from it only by ``train.pretrain``."""
    effect = []
    cmp = ctx.cmp
    for model in trained:
        other = without_pretraining(ctx.inp.models, model)
        pair = pair_row(cmp.pairs, PRIMARY, model, other) if other else None
        if other is None or pair is None:
            continue
        diff, p_holm, p_raw = pair
        means = cmp.means(PRIMARY)
        effect.append(
            [
                model,
                other,
                Cell(fmt(float(means[model]))),
                Cell(fmt(float(means[other]))),
                Cell(f"{diff:+.4f}"),
                Cell(fmt_p(p_raw)),
                Cell(fmt_p(p_holm)),
                Cell(verdict(diff, p_holm, other, cmp.alpha)),
            ]
        )
    if effect:
        sec.warning(cmp.too_few_queries)
        sec.table(
            ["Pre-trained", "Without", f"Test {PRIMARY}", "Without", "Δ", "p (Wilcoxon)", "p (Holm)", "Verdict"],
            effect,
            caption="What pre-training changed: each pre-trained model against the configured model whose entry "
            "is the same but for train.pretrain (paired over the test queries, Holm across all pairs).",
        )


def without_pretraining(models: dict, name: str) -> str | None:
    """The configured model whose entry equals ``name``'s without ``train.pretrain`` (its row without pre-training)."""
    entry = models[name]
    if not (entry.get("train") or {}).get("pretrain"):
        return None
    bare = {**entry, "train": {k: v for k, v in entry["train"].items() if k != "pretrain"}}
    return next((m for m, e in models.items() if m != name and e == bare), None)
