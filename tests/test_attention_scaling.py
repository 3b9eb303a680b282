"""The attention-scaling bench (stage ``attention_scaling``) and its report section: every attention is measured
in its own process with positive memory and time, configurations over the memory cap are skipped by estimate
without running, and the section's ratios and straight-line fit are the ones computed by hand."""

from __future__ import annotations

from argparse import Namespace

import numpy as np
import pytest

from longrank.io.json_yaml import read_json

ATTENTIONS = ["materialised", "sdpa", "separable"]
TINY = dict(batch_size=2, layers=2, hidden=64, heads=8)  # hidden divisible by the conv's 32 groups and 8 heads


def bench_args(out, **overrides):
    args = dict(
        lengths=[64, 128],
        attentions=ATTENTIONS,
        repeats=1,
        warmup=1,
        max_memory_gb=4.0,
        threads=1,
        device="cpu",
        seed=0,
        out=out,
        **TINY,
    )
    args.update(overrides)
    return Namespace(**args)


@pytest.mark.stage
def test_every_attention_is_measured_on_tiny_lengths(tmp_path):
    from longrank.bench import attention_scaling

    out = tmp_path / "attention_scaling.json"
    attention_scaling.run(bench_args(out))
    data = read_json(out)
    assert sorted((r["attention"], r["length"]) for r in data["rows"]) == sorted(
        (a, n) for a in ATTENTIONS for n in (64, 128)
    )
    for r in data["rows"]:
        assert not r["skipped"] and r["reason"] is None and r["device"] == "cpu"
        assert r["peak_mb"] > 0 and r["seconds"] > 0 and len(r["seconds_all"]) == 1, r
    assert data["config"]["heads"] == 8 and data["memory_method"] and data["method"]


def test_memory_estimate_is_quadratic_only_for_materialised_attention():
    from longrank.bench.attention_scaling import estimate_bytes

    shape = dict(batch_size=4, layers=2, hidden=256, heads=32)
    for attention in ("sdpa", "separable"):
        assert estimate_bytes(attention, 4000, **shape) == 2 * estimate_bytes(attention, 2000, **shape)
    quadratic = estimate_bytes("materialised", 2000, **shape) - estimate_bytes("separable", 2000, **shape)
    assert quadratic == 4 * 4 * 32 * 2000**2 * 4  # (layers + 2) n x n float32 per head and batch item
    assert quadratic >= 2 * 4 * 32 * 2000**2 * 4  # at least batch . heads . n^2 . 4 bytes per layer


@pytest.mark.stage
def test_configurations_over_the_cap_are_skipped_by_estimate(tmp_path, monkeypatch):
    from longrank.bench import attention_scaling

    shape = dict(length=128, **TINY)
    cap = (
        attention_scaling.estimate_bytes("separable", **shape)
        + attention_scaling.estimate_bytes("materialised", **shape)
    ) / 2
    started = []
    real = attention_scaling._in_fresh_process
    monkeypatch.setattr(
        attention_scaling, "_in_fresh_process", lambda job: started.append(job["attention"]) or real(job)
    )
    out = tmp_path / "attention_scaling.json"
    attention_scaling.run(
        bench_args(out, lengths=[128], attentions=["materialised", "separable"], max_memory_gb=cap / 2**30)
    )
    rows = {r["attention"]: r for r in read_json(out)["rows"]}
    assert started == ["separable"]  # the skipped configuration never ran
    assert rows["materialised"]["skipped"] and "max_memory_gb" in rows["materialised"]["reason"]
    assert rows["materialised"]["peak_mb"] is None and rows["materialised"]["seconds"] is None
    assert not rows["separable"]["skipped"] and rows["separable"]["peak_mb"] > 0


# ---- report section from a hand-made JSON ------------------------------------------------------------------

LENGTHS = [500, 1000, 2000, 4000]
SEP_MEM = [85.0, 160.0, 310.0, 610.0]  # 10 + 0.15 n exactly
SEP_TIME = [0.21, 0.40, 0.83, 1.58]  # near-linear, with noise
MAT_MEM = {500: 175.0, 1000: 550.0, 2000: 2050.0}  # skipped at 4,000
SDPA_MEM = [80.0, 140.0, 260.0, 500.0]
SDPA_TIME = [0.75, 3.0, 12.0, 48.0]


def hand_made() -> dict:
    rows = []
    for i, n in enumerate(LENGTHS):
        rows.append(
            {
                "attention": "separable",
                "length": n,
                "peak_mb": SEP_MEM[i],
                "seconds": SEP_TIME[i],
                "device": "cpu",
                "skipped": False,
                "reason": None,
            }
        )
        rows.append(
            {
                "attention": "sdpa",
                "length": n,
                "peak_mb": SDPA_MEM[i],
                "seconds": SDPA_TIME[i],
                "device": "cpu",
                "skipped": False,
                "reason": None,
            }
        )
        skipped = n not in MAT_MEM
        rows.append(
            {
                "attention": "materialised",
                "length": n,
                "peak_mb": MAT_MEM.get(n),
                "seconds": None if skipped else 1e-6 * n * n,
                "device": "cpu",
                "skipped": skipped,
                "reason": "estimated 24.6 GB > max_memory_gb 16" if skipped else None,
            }
        )
    return {
        "rows": rows,
        "config": {"layers": 2, "hidden": 256, "heads": 32, "batch_size": 4, "repeats": 3},
        "device": "cpu",
        "device_name": "CPU",
        "method": "hand-made",
    }


def test_summary_ratios_and_straight_line_fit():
    from longrank.report.attention_scaling_section import linear_fit, summarise

    s = summarise(hand_made())
    assert s["memory_materialised_at"] == pytest.approx(2050.0 / 310.0)  # at 2,000: materialised vs separable
    assert s["time_sdpa_at"] == pytest.approx(48.0 / 1.58)  # at 4,000: fused SDPA vs separable
    at = {r["length"]: r for r in s["ratios"]}
    assert at[4000]["memory_materialised"] is None and at[4000]["memory_sdpa"] == pytest.approx(500.0 / 610.0)
    assert s["fit_memory"]["slope"] == pytest.approx(0.15) and s["fit_memory"]["intercept"] == pytest.approx(10.0)
    assert s["fit_memory"]["r2"] == pytest.approx(1.0) and s["fit_memory"]["points"] == 4
    slope, intercept = np.polyfit(LENGTHS, SEP_TIME, 1)
    residual = np.asarray(SEP_TIME) - (slope * np.asarray(LENGTHS) + intercept)
    r2 = 1 - (residual**2).sum() / ((np.asarray(SEP_TIME) - np.mean(SEP_TIME)) ** 2).sum()
    assert s["fit_time"]["slope"] == pytest.approx(slope) and s["fit_time"]["intercept"] == pytest.approx(intercept)
    assert s["fit_time"]["r2"] == pytest.approx(r2) and 0.99 < r2 < 1.0
    assert s["growth"]["sdpa"]["seconds"] == pytest.approx(2.0)  # 0.75 n^2 / 500^2: quadratic time
    assert s["growth"]["materialised"]["seconds"] == pytest.approx(2.0)
    assert linear_fit([1.0, 1.0], [2.0, 3.0]) is None


def test_section_names_each_comparison_and_says_why_it_did_not_run_without_the_file(tmp_path):
    from types import SimpleNamespace

    from longrank.results.stage_outputs import AttentionScaling
    from longrank.report import attention_scaling_section, report
    from longrank.report.context import Context

    manifest = SimpleNamespace(attention_scaling=None)  # the report's manifest names no such file
    config = {"attention_scaling": {"enabled": False}}
    ctx = Context(SimpleNamespace(manifest=manifest, config=config), None, tmp_path / "fig")
    ctx.fig_dir.mkdir()
    off = attention_scaling_section.section(ctx)
    assert not off.ran and off.blocks[0].text.startswith("Not run: attention_scaling.enabled: false")
    manifest.attention_scaling = tmp_path / "attention_scaling.json"
    AttentionScaling(title="hand-made", **hand_made()).write(manifest.attention_scaling)
    sec = attention_scaling_section.section(ctx)
    text = " ".join(b.text for b in sec.blocks if b.kind in ("text", "howto", "note"))
    assert "Memory advantage (vs materialised attention only)" in text and "= 6.61×" in text
    assert "Time advantage (vs fused SDPA)" in text and "= 30.4×" in text
    assert "150.0 MB per 1,000 positions" in text and "R² = 1.000" in text
    assert "materialised softmax(QKᵀ)V at 4,000 (estimated 24.6 GB > max_memory_gb 16)" in text
    images = [b.path for b in sec.blocks if b.kind == "image"]
    assert len(images) == 1 and images[0].stat().st_size > 0
    assert attention_scaling_section in report.SECTIONS


def test_missing_lengths_give_no_headline_ratio():
    from longrank.report.attention_scaling_section import summarise

    data = hand_made()
    data["rows"] = [r for r in data["rows"] if r["length"] in (500, 1000)]
    s = summarise(data)
    assert s["memory_materialised_at"] is None and s["time_sdpa_at"] is None
    assert s["fit_memory"]["points"] == 2
