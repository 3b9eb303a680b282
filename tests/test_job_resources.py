"""Each GPU job's request (src/longrank/plan/job_resources.py) for the repository's real configs, resolved as the
workflow's parse resolves them: every full-scale job asks for at least the GPU bill's own time and at most three
times the estimate, slower models ask for more, a retry asks for more, and the package's copy of the bill is the
bill. tests/test_slurm_profile.py checks the same requests through Snakemake and the SLURM plugin."""

from __future__ import annotations

import json
import math

import pytest

from conftest import REPO
from longrank.config.files import merged
from longrank.plan import build_plan
from longrank.plan.job_resources import FLOOR_MINUTES, FP32_SLOWDOWN, LOAD_OVERHEAD_S, JobResources, gpu_bill
from longrank.config.train_settings import TrainSettings
from longrank.validation.validate import validate_config

BILL_FILES = ("gpu_bill_call1.json", "gpu_bill_call2.json")  # a model in both: call2's row (docs/gpu-bill.md)
FULL_SCALE = {year: ("config/trec-dl.yaml", f"config/trec-dl-{year}.yaml") for year in ("2019", "2020")}
TEST_QUERIES = {"2019": 43, "2020": 45}  # the years' judged queries (config/trec-dl.yaml)


def jobs_of(*files: str, edit=None) -> JobResources:
    """The requests of ``--configfile *files`` over config/config.yaml as the workflow's parse plans them (``edit``
    changes the merged config first)."""
    config = merged(files)
    if edit:
        edit(config)
    config = validate_config(config)
    return JobResources(build_plan(config, f"results/{config['dataset']['name']}"))


def measured_rows() -> dict[str, dict]:
    """The bill's rows as benchmarks/gpu_bill.py wrote them."""
    rows = {}
    for name in BILL_FILES:
        for row in json.loads((REPO / "benchmarks" / "gpu-h100" / name).read_text())["rows"]:
            rows[row["model"]] = row
    return rows


@pytest.fixture(scope="module", params=sorted(FULL_SCALE))
def full_scale(request) -> tuple[str, JobResources]:
    return request.param, jobs_of(*FULL_SCALE[request.param])


def test_the_packages_copy_of_the_bill_is_the_bills():
    bill, rows = gpu_bill(), measured_rows()
    assert set(bill.models) == set(rows)
    for name, row in rows.items():
        copy = bill.models[name]
        assert (copy.type, copy.batch_size, copy.negatives) == (row["type"], row["batch_size"], row["negatives"]), name
        assert copy.step_s == pytest.approx(row["train_step"]["median_s"], rel=5e-3), name
        assert copy.rerank_per_1000_s == pytest.approx(row["rerank_per_1000_s"], rel=5e-3), name
        assert copy.train_peak_mib >= row["train_peak_mb"] and copy.rerank_peak_mib >= row["rerank_peak_mb"], name
    assert bill.device == json.loads((REPO / "benchmarks" / "gpu-h100" / BILL_FILES[0]).read_text())["device"]


def test_every_full_scale_training_asks_for_the_bills_time_and_at_most_three_times_the_estimate(full_scale):
    year, jobs = full_scale
    rows = measured_rows()
    for model in jobs.plan.trained:
        estimate, request = jobs.training_estimate(model), jobs.train(model, 1)
        minutes = request.runtime
        assert minutes * 60 >= estimate.seconds and minutes <= 3 * estimate.seconds / 60, (year, model, minutes)
        if model in rows:  # the bill's own hours of this entry (its steps and dev evaluations on the H100)
            billed = rows[model]["hours"]["train"] + rows[model]["hours"]["dev"]
            assert minutes >= billed * 60, (year, model, minutes, billed)
            assert estimate.compute_s == pytest.approx(rows[model]["hours"]["train"] * 3600, rel=0.01), model


def test_every_full_scale_rerank_asks_for_the_bills_time_and_at_most_three_times_the_estimate(full_scale):
    year, jobs = full_scale
    rows = measured_rows()
    for model in jobs.plan.models:
        estimate, request = jobs.rerank_estimate(model), jobs.rerank(model, 1)
        assert request.runtime * 60 >= estimate.seconds and request.runtime <= 3 * estimate.seconds / 60, model
        if model in rows:  # the bill's bf16 scoring of the year's test queries: fp32 takes longer
            depth = jobs.plan.effective[model].rerank_depth
            billed = TEST_QUERIES[year] * depth * rows[model]["rerank_per_1000_s"] / 1000
            assert estimate.compute_s >= billed, model
            assert estimate.seconds >= billed + LOAD_OVERHEAD_S, model


def test_slower_models_ask_for_more_training_time(full_scale):
    _, jobs = full_scale
    runtime = {model: jobs.train(model, 1).runtime for model in ("mir", "mores", "knrm")}
    assert runtime["mir"] > runtime["mores"] > runtime["knrm"], runtime
    assert runtime["knrm"] == FLOOR_MINUTES  # 5 minutes of steps and 15 of loading, x 1.5: under the floor
    assert runtime["mir"] > 24 * 60  # MIR's 46,000 steps of 1.309 s alone take 16.7 h


def test_a_retry_asks_for_more(full_scale):
    _, jobs = full_scale
    for model in jobs.plan.trained:
        first, retry, last = (jobs.train(model, attempt) for attempt in (1, 2, 3))
        assert first.runtime < retry.runtime < last.runtime, model
        assert first.mem_mb < retry.mem_mb < last.mem_mb, model
    for model in jobs.plan.models:
        assert jobs.rerank(model, 2).runtime > jobs.rerank(model, 1).runtime, model


def test_a_job_over_a_40_gb_card_asks_for_the_configured_constraint():
    def large(config):
        config["large_gpu_constraint"] = "gpu80g"

    constrained = jobs_of(*FULL_SCALE["2019"], edit=large)
    over = {m for m in constrained.plan.trained if constrained.train(m, 1).constraint == "gpu80g"}
    # the bill's training peaks over 38,912 MiB: MIR 53.0, MORES 44.3 / 44.7, FirstP 39.7 GB (and MIR's FirstP,
    # of FirstP's row)
    assert over == {"mir", "mores", "mores_1ib", "bert_firstp", "bert_firstp_mir"}
    assert all(constrained.rerank(m, 1).constraint is None for m in constrained.plan.models)
    unconstrained = jobs_of(*FULL_SCALE["2019"])
    assert unconstrained.train("mir", 1).constraint is None  # no feature named: nothing constrained

    def on_cpu(config):
        large(config)
        config["device"] = "cpu"

    assert jobs_of(*FULL_SCALE["2019"], edit=on_cpu).train("mir", 1).constraint is None


def test_an_entry_takes_its_own_row_else_its_types_slowest_else_the_unmeasured_bound():
    jobs = jobs_of(*FULL_SCALE["2019"])
    bill = jobs.bill
    assert bill.row_of("mores_1ib", "mores") is bill.models["mores_1ib"]
    assert bill.row_of("bert_firstp_mir", "bert_ranker") is bill.models["bert_firstp"]  # FirstP's 0.886 s per step
    assert bill.row_of("knrm", "tk") is bill.models["tk"]  # a name of the bill on another type: its type's row
    assert bill.row_of("bi_encoder", "bi_encoder") is bill.unmeasured
    slowest = max(r.seconds_per_document for r in bill.models.values())
    assert bill.unmeasured.seconds_per_document > slowest
    assert bill.unmeasured.rerank_per_1000_s > max(r.rerank_per_1000_s for r in bill.models.values())


def test_the_step_time_scales_with_the_documents_each_gpu_takes():
    base = jobs_of(*FULL_SCALE["2019"]).training_estimate("knrm")

    def batch(size: int, processes: int = 1):
        def edit(config):
            config["models"]["knrm"]["train"] |= {"batch_size": size, "processes": processes}

        return jobs_of(*FULL_SCALE["2019"], edit=edit).training_estimate("knrm")

    assert batch(64).compute_s == pytest.approx(2 * base.compute_s)
    assert batch(64, processes=2).compute_s == pytest.approx(base.compute_s)
    assert batch(64).gpu_mib > base.gpu_mib == batch(16).gpu_mib  # a smaller batch: the bill's peak, a bound


def test_pretraining_is_estimated_from_its_own_steps_and_held_out_share():
    jobs = jobs_of("config/studies/pretrain.yaml")
    pretrain = jobs.plan.config["models"]["knrm_pretrained"]["train"]["pretrain"]
    pseudo = jobs.plan.config["pseudo_queries"][pretrain["queries"]]
    estimate, row = jobs.pretraining_estimate("knrm_pretrained"), jobs.bill.models["knrm"]
    settings = TrainSettings.from_entry("knrm_pretrained", jobs.plan.config["models"]["knrm_pretrained"])
    scale = settings.batch_size * (1 + settings.negatives) / row.documents_per_step
    assert estimate.compute_s == pytest.approx(pretrain["steps"] * row.step_s * scale)
    dev_queries = math.ceil(pseudo["count"] * pseudo["dev"])
    evaluations = math.ceil(pretrain["steps"] / pretrain["eval_every"])
    depth = min(pseudo["depth"], jobs.plan.effective["knrm_pretrained"].rerank_depth)
    assert estimate.evaluation_s == pytest.approx(
        evaluations * dev_queries * depth * row.rerank_per_1000_s / 1000 * FP32_SLOWDOWN
    )
    assert jobs.pretrain("knrm_pretrained", 2).runtime > jobs.pretrain("knrm_pretrained", 1).runtime
