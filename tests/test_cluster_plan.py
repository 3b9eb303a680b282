"""benchmarks/cluster_plan.py on the real full-scale dry run (the SLURM profile, TREC DL 2019): every job Snakemake
plans is read with its request and its waits, and the critical path and the cluster's wall time bound each other."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest

from conftest import REPO

pytestmark = pytest.mark.stage  # a dry run of the workflow

spec = importlib.util.spec_from_file_location("cluster_plan", REPO / "benchmarks" / "cluster_plan.py")
cluster_plan = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = cluster_plan  # its dataclasses look their module up
spec.loader.exec_module(cluster_plan)


@pytest.fixture(scope="module")
def dry_run_text() -> str:
    return cluster_plan.dry_run(["config/trec-dl.yaml", "config/trec-dl-2019.yaml"])


def test_every_planned_job_is_read_with_its_request_and_what_it_waits_for(dry_run_text):
    jobs = cluster_plan.parse_jobs(dry_run_text)
    planned = int(re.search(r"^total\s+(\d+)$", dry_run_text, flags=re.M).group(1))
    assert len(jobs) == planned
    by_rule = {job.rule: job for job in jobs}
    assert all(job.minutes > 0 for job in jobs if job.rule != "all")
    assert by_rule["train"].gpus == 1 and by_rule["data"].gpus == 0
    report = by_rule["report"]
    assert report.needs and not by_rule["data"].needs  # the report waits for jobs; the data stage for none
    trains = [j for j in jobs if j.rule == "train"]
    assert len({j.minutes for j in trains}) > 1  # each training asks for its own time


def test_the_wall_time_is_at_least_the_critical_path_and_one_gpu_takes_every_gpu_hour(dry_run_text):
    jobs = cluster_plan.parse_jobs(dry_run_text)
    length, chain = cluster_plan.critical_path(jobs)
    assert chain[0].rule == "data" and length >= max(job.hours for job in jobs)
    for earlier, later in zip(chain, chain[1:]):
        assert earlier.jobid in later.needs
    assert cluster_plan.list_schedule(jobs, gpus=64, cores=4096) == pytest.approx(length)
    gpu_hours = sum(job.hours * job.gpus for job in jobs)
    assert cluster_plan.list_schedule(jobs, gpus=1, cores=4096) >= gpu_hours - 1e-9
