"""Section: when and from what the report was made, the collection, the package versions and the resolved config."""

from __future__ import annotations

import datetime as dt
import json
import platform

from longrank.results.stage_outputs import TrainSummary
from longrank.results.run_metadata import package_versions, read_run_metadata, source
from longrank.report.context import Context
from longrank.report.html import Section
from longrank.tables import fmt


def section(ctx: Context) -> Section:
    inp = ctx.inp
    sec = Section("Provenance")
    versions = [["python", platform.python_version()], *map(list, package_versions().items())]
    sec.text(
        f"Generated {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')} from {inp.manifest.config} "
        "and the files its rule named."
    )
    sec.text(code_version(inp))
    dw = inp.stats["doc_words"]
    sec.text(
        f"Collection: {inp.stats['num_docs']} documents, {inp.stats['num_queries']} queries; document words mean "
        f"{fmt(dw['mean'], 1)}, median {dw['median']}, p90 {dw['p90']}, max {dw['max']}."
    )
    sec.text(relevance(inp.stats["relevance"]))
    missing = missing_judged(inp.stats.get("missing_judged_documents") or {})
    if missing:
        sec.warning(missing)
    roles = inp.stats["query_sets"]
    sec.text(
        f"Queries: models trained on {roles['train']}; the early-stopping point and interpolation weights were chosen "
        f"on {roles['dev']}; the test queries are {roles['test']}."
    )
    sec.text("Seeds (the same config and seeds give byte-identical run files on the same machine): " + seeds(inp) + ".")
    sec.text(determinism(inp))
    sec.table(["Package", "Version"], versions)
    config, summary = ran_config(inp)
    sec.details(summary, compact_json(config))
    return sec


def compact_json(value, depth: int = 0, levels: int = 3) -> str:
    """JSON with the first ``levels`` levels of mappings one key a line and anything deeper on its key's line (a
    model's ``train`` settings, its resolved architecture): the config a reader scans, about a tenth of the lines of
    indented JSON, and still JSON."""
    if not isinstance(value, dict) or not value or depth >= levels:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    pad = "  " * (depth + 1)
    items = ",\n".join(
        f"{pad}{json.dumps(k, ensure_ascii=False)}: {compact_json(v, depth + 1, levels)}"
        for k, v in sorted(value.items())
    )
    return "{\n" + items + "\n" + "  " * depth + "}"


def models_that_ran(inp) -> list[str]:
    """The enabled model entries present in this run: a run file, a training or a first stage of theirs is among
    the files the rule named (an enabled entry always is; a disabled one never)."""
    named = set(inp.manifest.runs) | set(inp.manifest.training) | set(inp.manifest.details)
    stage_models = {spec.get("model") for spec in inp.first_stages.values() if spec.get("method") == "model"}
    return [m for m in inp.models if m in named or m in stage_models]


def names(items: list[str], shown: int = 6) -> str:
    """``a, b, c`` or ``a, b, c, … and 4 more``: a list in one line."""
    return ", ".join(items[:shown]) + (f", … and {len(items) - shown} more" if len(items) > shown else "")


def ran_config(inp) -> tuple[dict, str]:
    """The resolved config (config.json) with only the model entries that ran, and the one-line summary above it
    naming how many entries were left out: a disabled entry (``enabled: false``, e.g. the default config's papers'
    variants that an overlay switched off) changes nothing in this run, and would fill most of the page."""
    ran = models_that_ran(inp)
    every = list((inp.config.get("models") or {}).keys())
    disabled = [m for m in every if m not in inp.models]
    unused = [m for m in inp.models if m not in ran]
    config = {
        **inp.config,
        "models": {m: inp.config["models"][m] for m in every if m in ran},
        **(
            {"resolved_models": {m: v for m, v in inp.config["resolved_models"].items() if m in ran}}
            if "resolved_models" in inp.config
            else {}
        ),
    }
    left_out = []
    if disabled:
        left_out.append(
            f"{len(disabled)} disabled model entr{'y' if len(disabled) == 1 else 'ies'} left out ({names(disabled)})"
        )
    if unused:
        left_out.append(f"{len(unused)} enabled but absent from this run left out ({names(unused)})")
    summary = (
        f"Resolved config ({inp.manifest.config}): the {len(ran)} model entr{'y' if len(ran) == 1 else 'ies'} that ran"
        + (f"; {'; '.join(left_out)}" if left_out else "")
        + " (click to unfold)."
    )
    return config, summary


def relevance(applied: dict) -> str:
    """The judgments as the data stage read them (stats.json's ``relevance``): every measure's gains come from it."""
    gains = ", ".join(f"{grade} → {gain:g}" for grade, gain in applied["gains"].items())
    counts = applied["judgments_by_grade"]
    excluded = applied["exclude_grades"]
    return (
        f"Relevance: grade → gain {gains}"
        + (" (the grades' order reversed on purpose)" if applied["reverses_grades"] else "")
        + "; "
        + (f"judgments of grade {', '.join(map(str, excluded))} excluded" if excluded else "no grade excluded")
        + f"; judgments by grade {', '.join(f'{g}: {n:,}' for g, n in counts.items())}."
    )


def missing_judged(by_role: dict) -> str:
    """Judgments of documents the collection lacks, as the data stage dropped and counted them (stats.json's
    ``missing_judged_documents``, per query set): none, no sentence."""
    parts = [
        f"{role}: {r['judgments']:,} judgments ({r['relevant']:,} relevant) of {r['documents']:,} documents, e.g. "
        f"{', '.join(r['examples'][:3])}; {len(r['queries_without_relevant'])} queries left with no relevant document"
        + (f" ({', '.join(r['queries_without_relevant'][:3])})" if r["queries_without_relevant"] else "")
        for role, r in by_role.items()
    ]
    if not parts:
        return ""
    return (
        "Judged documents missing from the collection, dropped (a query left with no relevant document is not "
        "tested, trained on or sampled for dev): " + "; ".join(parts) + "."
    )


def seeds(inp) -> str:
    """Every seed a run depends on: the split's, word2vec's (where a model uses it) and each model's training
    seed, as its training job recorded it (``train_summary.json``: the config's ``train.seed`` or the default)."""
    config = inp.config
    parts = [f"split {config.get('splits', {}).get('seed', '?')}"]
    if any(entry.get("embeddings") == "word2vec" for entry in inp.models.values()):
        parts.append(f"word2vec {config.get('word2vec', {}).get('seed', '?')}")
    by_seed: dict[str, list[str]] = {}
    for name, paths in inp.manifest.training.items():
        summaries = [TrainSummary.read(p) for p in paths]
        recorded = {
            str(s.hyperparameters["seed"]) for s in summaries if "seed" in s.hyperparameters
        }  # none: not trained
        if recorded:
            by_seed.setdefault("/".join(sorted(recorded)), []).append(name)
    parts += [f"training {seed} ({', '.join(names)})" for seed, names in sorted(by_seed.items())]
    return "; ".join(parts)


def determinism(inp) -> str:
    """Whether the trainings ran with PyTorch's deterministic algorithms (``deterministic``), as each training's
    summary recorded it, and what that means for a rerun."""
    trained = [TrainSummary.read(p) for paths in inp.manifest.training.values() for p in paths]
    on = sorted({s.model for s in trained if s.deterministic})
    off = sorted({s.model for s in trained if not s.deterministic and s.steps_run})
    devices = {s.device for s in trained if s.steps_run and s.device}
    if not on and not off:
        return "Deterministic algorithms: no model was trained here."
    where = ", ".join(sorted(devices)) or "?"
    if not off:
        return f"Deterministic algorithms: on for every training ({where}): a rerun repeats every run to the bit."
    cpu_only = devices <= {"cpu"}
    said = (
        "off; on the CPU (one thread a job) a rerun still repeats every run to the bit"
        if cpu_only
        else f"off ({where}): on a GPU a rerun may differ in the last bits (set `deterministic: true` to repeat them)"
    )
    return f"Deterministic algorithms: {said}" + (f"; on for {', '.join(on)}." if on else ".")


def code_version(inp) -> str:
    """The commit the runs were made from, as the first run's ``.meta.yaml`` recorded it (longrank.results.run_metadata), or the
    report's own checkout where no run has one (runs made before the metadata existed)."""
    for run in [*inp.manifest.candidates.values(), *inp.manifest.runs.values()]:
        meta = read_run_metadata(run)
        if meta is not None:
            # dirty is LongRank's own key (``longrank: implementation:``); a record from before run-version 2.0 kept
            # it beside the commit
            src = meta.get("implementation", {}).get("source", {})
            src = src | ((meta.get("longrank") or {}).get("implementation") or {})
            where = f"as recorded beside {run}.meta.yaml (every run file has one)"
            break
    else:
        src, where = source(), "the report's own checkout (no run file has a .meta.yaml beside it)"
    commit, dirty = src.get("commit", "unknown"), src.get("dirty", "unknown")
    state = {True: ", with uncommitted changes to tracked files", False: ", a clean tree"}.get(dirty, "")
    return f"Code: commit {commit}{state}, {where}."
