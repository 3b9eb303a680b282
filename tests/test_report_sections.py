"""The report's sections on what the real stages write, in the quick tier: the data stage's files, BM25's candidates, the
sanity stage's runs and config.json from the config stage over config/config.yaml. A section that has nothing to
show says why (the config key or the missing input); a figure says which of its panels repeat and why; the resolved
config is folded and holds only the models that ran. (The end-to-end run's report: tests/test_report.py.)"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from longrank.cli import main
from longrank.validation.validate import validate_config
from longrank.config.files import merged
from longrank.io.json_yaml import write_json
from longrank.report import (
    attention_scaling_section,
    efficiency,
    interpolation,
    length_bias,
    max_length,
    mir_section,
    noninferiority,
    provenance,
    regions,
    training,
)
from longrank.report.context import Context
from longrank.report.html import render_html, render_markdown
from longrank.report.inputs import Inputs
from longrank.report.manifest import COMPARE_FILES, DATA_FILES, Manifest
from longrank.retrieval import sanity

DEPTH = 30  # BM25's top_k here; the synthetic queries match about 12 documents each


def config_json(tiny_data: Path, overlay: dict) -> Path:
    """config.json as stage ``resolved_config`` writes it: config/config.yaml with ``overlay`` over it, validated as the
    Snakefile validates it, on the tiny collection."""
    src = tiny_data / "src"
    config = merged(())
    config.update(
        dataset={
            "name": "tiny",
            "source": "local",
            "docs": str(src / "docs.jsonl"),
            "queries": str(src / "queries.tsv"),
            "qrels": str(src / "qrels.txt"),
        },
        first_stages=[{"name": "bm25", "method": "bm25", "top_k": DEPTH}],
    )
    for key, value in overlay.items():
        config[key] = {**config.get(key, {}), **value} if isinstance(value, dict) and key != "models" else value
    validate_config(config)
    out = tiny_data / "config.json"
    main(["resolved_config", "--json", json.dumps(config), "--out", str(out)])
    return out


def sanity_run(tiny_data: Path, name: str, words: int | None) -> Path:
    """The sanity stage's run over BM25's candidates (a reranker that needs no training)."""
    out = tiny_data / "runs" / f"{name}.run"
    parser = argparse.ArgumentParser()
    sanity.add_arguments(parser)
    argv = ["--data", str(tiny_data / "data"), "--candidates", str(tiny_data / "bm25.run"), "--out", str(out)]
    argv += ["--rerank-depth", "100"]  # the global floor's: config/config.yaml's rerank_depth
    sanity.run(parser.parse_args(argv + (["--read-words", str(words)] if words else [])))
    return out


def context(tiny_data: Path, overlay: dict, runs: dict[str, Path] | None = None, **manifest) -> Context:
    data = tiny_data / "data"
    stats = tiny_data / "bm25.stats.json"
    write_json(stats, {})
    inp = Inputs(
        Manifest(
            config=str(config_json(tiny_data, overlay)),
            data={name: str(data / name) for name in DATA_FILES},
            compare={name: "" for name in COMPARE_FILES},  # no section here reads compare's files
            runs={s: str(p) for s, p in (runs or {}).items()},
            evals={},
            candidates={"bm25": str(tiny_data / "bm25.run")},
            candidate_stats={"bm25": str(stats)},
            **manifest,
        )
    )
    systems = ["bm25", *(runs or {})]
    # compare's outputs as far as these sections read them: no system evaluated yet (the sections above the
    # comparison read the runs and the config)
    table = pd.DataFrame(columns=["system", "measure", "mean", "ci_low", "ci_high"])
    cmp = SimpleNamespace(
        systems=systems, measures=["nDCG@10"], noninferiority=None, frames={}, pairs=None, table=table
    )
    fig_dir = tiny_data / "figures"
    fig_dir.mkdir(exist_ok=True)
    return Context(inp, cmp, fig_dir)


def notes(section) -> list[str]:
    return [b.text for b in section.blocks if b.kind == "note"]


def test_a_section_that_did_not_run_names_the_key_that_switched_it_off(tiny_data):
    off = {
        "attention_scaling": {"enabled": False},
        "mores_speed": {"enabled": False},
        "mir_speed": {"enabled": False},
    }
    ctx = context(tiny_data, off)
    said = {
        "attention scaling": (attention_scaling_section.section(ctx), "attention_scaling.enabled: false"),
        "non-inferiority": (noninferiority.section(ctx), "evaluation.noninferiority_reference: null"),
        "efficiency": (efficiency.section(ctx), "mores_speed.enabled: false"),
        "MIR": (mir_section.section(ctx), "mir not among the compared systems"),
        "regions": (regions.section(ctx), "hold no region positions (runs/<model>.details.jsonl is empty"),
        "length sweep": (max_length.section(ctx), "no two enabled model entries differ in max_doc_len only"),
        "training": (training.section(ctx), "knrm has no training summary among the report's inputs"),
    }
    for name, (section, why) in said.items():
        assert not section.ran, name
        assert any(n.startswith("Not run: ") and why in n for n in notes(section)), (name, notes(section))
    assert "mir_speed.enabled: false" in " ".join(notes(said["efficiency"][0]))
    assert "Skipped" not in render_markdown("r", [s for s, _ in said.values()])


def test_with_every_model_disabled_each_section_says_so(tiny_data):
    every = merged(())["models"]
    ctx = context(tiny_data, {"models": {m: {**e, "enabled": False} for m, e in every.items()}})
    for module in (length_bias, training, efficiency, mir_section, regions, interpolation):
        section = module.section(ctx)
        assert not section.ran, module.__name__
        assert any("every entry of models: has enabled: false" in n for n in notes(section)), notes(section)


def test_identical_length_bias_panels_say_the_first_stage_returned_fewer_candidates_than_the_plot_depth(tiny_data):
    """Two rerankers whose top 30 is BM25's whole candidate list on every query (about 12 candidates each): their
    panels are the same curve, and the same as BM25's, and the caption says why."""
    runs = {"knrm": sanity_run(tiny_data, "knrm", None), "tk": sanity_run(tiny_data, "tk", 3)}
    ctx = context(tiny_data, {"rerank_depth": 100}, runs)
    section = length_bias.section(ctx)
    image = next(b for b in section.blocks if b.kind == "image")
    assert image.path.stat().st_size > 0
    n = len(ctx.inp.evaluated_qids)
    assert n > 0
    assert "The panels of knrm and tk are identical" in image.body, image.body
    depth = int(re.search(r"top (\d+)\)", image.text).group(1))  # half the shallowest rerank depth, at most 30
    assert depth > 12  # more than the ~12 candidates the synthetic queries get
    assert f"BM25 returned no more candidates than the plot's depth ({depth}) on all {n} test queries" in image.body
    assert "in the panel of knrm the model's curve is the reference curve" in image.body
    html = render_html("r", [section])
    assert re.search(r"<figcaption>.*<b>Note:</b> The panels of knrm and tk are identical", html)
    assert "**Note:** The panels of knrm and tk are identical" in render_markdown("r", [section])


def test_distinct_panels_carry_no_note():
    """Panels that each draw their own curve get no note; an all-zero one is named empty."""
    from longrank.report import plots

    series = {"a": [0.1, 0.2, 0.7], "b": [0.3, 0.3, 0.4]}
    assert plots.panel_check(series, [0.2, 0.2, 0.6]) == ""
    assert plots.panel_check({**series, "c": [0.0, 0.0, 0.0]}).startswith("The panel of c is empty")


def test_the_resolved_config_is_folded_and_holds_only_the_models_that_ran(tiny_data):
    runs = {"knrm": sanity_run(tiny_data, "knrm", None)}
    every = merged(())["models"]
    overlay = {"models": {m: {**e, "enabled": m == "knrm"} for m, e in every.items()}}
    ctx = context(tiny_data, overlay, runs)
    section = provenance.section(ctx)
    folded = next(b for b in section.blocks if b.kind == "details")
    shown = json.loads(folded.body)
    assert list(shown["models"]) == ["knrm"] and list(shown["resolved_models"]) == ["knrm"]
    assert shown["first_stages"] and shown["dataset"]  # the rest of the config is all there
    left_out = len(every) - 1
    assert f"the 1 model entry that ran; {left_out} disabled model entries left out (" in folded.text
    html = render_html("r", [section])
    assert re.search(r"<details><summary>Resolved config .*</summary><pre>", html)
    assert "<details open" not in html
    md = render_markdown("r", [section])
    assert "<details>" in md and "bert_maxp128" not in md.split("<details>")[1].split("</summary>")[1]


@pytest.mark.parametrize("runs", [1, 5])
def test_a_rate_says_1_run_or_gives_the_range_of_its_passes(runs):
    from longrank.results.stage_outputs import Rate, Timing

    rate = Rate(docs=8, timing=Timing(seconds=[0.004, 0.005, 0.008, 0.004, 0.004][:runs], warmup=1))
    text = rate.describe()
    if runs == 1:
        assert text == "2.00 (1 run)" and Timing(seconds=[0.1], warmup=0).describe() == "1 run (no spread)"
    else:
        assert text == "2.00 (1.00–2.00, n=5)"  # 8 docs in 4 ms (the median), in 8 ms (slowest), in 4 ms
    assert Rate.from_json(rate.to_json()) == rate


def test_wins_ties_and_losses_per_query_and_the_largest_of_each():
    from longrank.report.per_query_section import outcomes

    system = pd.Series({"q1": 0.5, "q2": 0.2, "q3": 0.3, "q4": float("nan")})
    stage = pd.Series({"q1": 0.4, "q2": 0.2, "q3": 0.6, "q4": 0.1})
    found = outcomes(system, stage)
    assert (found["wins"], found["ties"], found["losses"]) == (1, 1, 1)  # q4: not evaluated by the system
    assert found["gain"] == ("q1", pytest.approx(0.1)) and found["loss"] == ("q3", pytest.approx(-0.3))


def test_the_sections_that_did_not_run_are_listed_once_at_the_end():
    from longrank.report.html import NOT_RUN_TITLE, Section, not_run_listed_once

    off = Section("Bench").not_run("bench.enabled: false")
    shown = not_run_listed_once([off, Section("Verdict").text("a wins"), Section("Seeds").not_run("one seed")])
    assert [s.title for s in shown] == ["Verdict", NOT_RUN_TITLE]
    md = render_markdown("r", shown)
    assert "| Bench | bench.enabled: false. |" in md and "| Seeds | one seed. |" in md
    assert "*Not run" not in md and "## 1. Verdict" in md and f"## 2. {NOT_RUN_TITLE}" in md
    assert not_run_listed_once(shown[:1]) == shown[:1]  # every section ran: no list
