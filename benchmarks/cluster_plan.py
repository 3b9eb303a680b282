"""The full-scale run on a cluster: every job of a dry run under the SLURM profile with what it asks SLURM for, summed
per rule, its critical path, and its wall time on a cluster of a stated size.

    python benchmarks/cluster_plan.py --configfile config/trec-dl.yaml config/trec-dl-2019.yaml \\
        --gpus 8 --cpu-nodes 4 --cores-per-node 32 --out docs/cluster-plan.md

It runs ``snakemake -n --profile profiles/slurm report`` with the given config files in a scratch directory (the
workflow's own plan: every job, its inputs, outputs and resources as the rules and the profile resolve them), builds
the DAG from the jobs' inputs and outputs, and takes each job's time as its first-attempt ``runtime`` request: for
the GPU jobs (train, train_pretrain, rerank) the GPU bill's estimate x ``longrank.plan.job_resources.MARGIN``, for the
others the profile's bound. So every figure is an upper bound the scheduler will hold the job to, not a measurement;
the estimate column divides the GPU jobs' requests by the margin. The wall time is a list schedule (Snakemake's:
the ready job of highest priority first, here the longest) of the jobs on ``--gpus`` GPUs and ``--cpu-nodes`` x
``--cores-per-node`` cores, a GPU job holding one GPU and its ``cpus_per_task`` cores.
"""

from __future__ import annotations

import argparse
import heapq
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GPU_RULES_WITH_ESTIMATES = {"train", "train_pretrain", "rerank"}  # longrank.plan.job_resources's rules


@dataclass
class Job:
    jobid: int
    rule: str
    wildcards: str
    inputs: list[str]
    outputs: list[str]
    minutes: float
    mem_mb: float
    gpus: int
    cores: int
    needs: set[int] = field(default_factory=set)

    @property
    def hours(self) -> float:
        return self.minutes / 60


def dry_run(configfiles: list[str]) -> str:
    """The profile's dry run of ``report`` with ``configfiles``, in a scratch directory seeing the repository's config/."""
    with tempfile.TemporaryDirectory() as scratch:
        os.symlink(REPO / "config", Path(scratch) / "config")
        command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--profile",
                   str(REPO / "profiles" / "slurm"), "-n", "report", "--configfile", *configfiles]  # fmt: skip
        done = subprocess.run(command, cwd=scratch, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the dry run failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout + done.stderr


def parse_jobs(text: str) -> list[Job]:
    """Each ``rule X:`` block of a dry run's output, and which jobs each one waits for (an input another writes)."""
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:\n)", text):
        head = re.match(r"(?:local)?rule (\w+):\n", block)
        if not head:
            continue
        fields = dict(re.findall(r"^    (\w+): (.*)$", block, flags=re.M))
        if "jobid" not in fields:
            continue
        resources = dict(re.findall(r"(\w+)=([^,]+)", fields.get("resources", "")))
        jobs.append(
            Job(
                jobid=int(fields["jobid"]),
                rule=head.group(1),
                wildcards=fields.get("wildcards", ""),
                inputs=_paths(fields.get("input", "")),
                outputs=_paths(fields.get("output", "")),
                minutes=float(resources.get("runtime", 0) or 0),
                mem_mb=float(resources.get("mem_mb", 0) or 0),
                gpus=int(resources.get("gpu", 0) or 0),
                cores=int(resources.get("cpus_per_task", 1) or 1),
            )
        )
    writer = {path: job.jobid for job in jobs for path in job.outputs}
    for job in jobs:
        job.needs = {writer[path] for path in job.inputs if path in writer} - {job.jobid}
    return jobs


def _paths(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def critical_path(jobs: list[Job]) -> tuple[float, list[Job]]:
    """The longest chain of waits, in hours, and its jobs in order."""
    by_id = {job.jobid: job for job in jobs}
    finish: dict[int, float] = {}
    before: dict[int, int | None] = {}

    def end(jobid: int) -> float:
        if jobid not in finish:
            job = by_id[jobid]
            start = max(((end(n), n) for n in job.needs), default=(0.0, None))
            finish[jobid], before[jobid] = start[0] + job.hours, start[1]
        return finish[jobid]

    last = max(by_id, key=end)
    chain, at = [], last
    while at is not None:
        chain.append(by_id[at])
        at = before[at]
    return finish[last], chain[::-1]


def list_schedule(jobs: list[Job], gpus: int, cores: int) -> float:
    """Hours until every job has run on ``gpus`` GPUs and ``cores`` cores: whenever resources free, the ready jobs
    start longest first (a job holding more than the cluster has runs alone)."""
    waiting = {job.jobid: set(job.needs) for job in jobs}
    by_id = {job.jobid: job for job in jobs}
    running: list[tuple[float, int]] = []
    now, free_gpus, free_cores = 0.0, gpus, cores
    while waiting or running:
        ready = sorted((j for j, needs in waiting.items() if not needs), key=lambda j: -by_id[j].hours)
        for jobid in ready:
            job = by_id[jobid]
            gpu, core = min(job.gpus, gpus), min(job.cores, cores)
            if gpu <= free_gpus and core <= free_cores:
                free_gpus, free_cores = free_gpus - gpu, free_cores - core
                heapq.heappush(running, (now + job.hours, jobid))
                del waiting[jobid]
        now, done = heapq.heappop(running)
        job = by_id[done]
        free_gpus, free_cores = free_gpus + min(job.gpus, gpus), free_cores + min(job.cores, cores)
        for needs in waiting.values():
            needs.discard(done)
    return now


def table(jobs: list[Job], args) -> str:
    """The page: per rule, its jobs and hours; the totals; the critical path; the cluster's wall time."""
    rules: dict[str, list[Job]] = defaultdict(list)
    for job in jobs:
        rules[job.rule].append(job)
    from longrank.plan.job_resources import MARGIN

    lines = [
        "| rule | jobs | longest job (h, request) | GPU-hours (request) | GPU-hours (estimate) | core-hours (request) "
        "| largest memory request (GB) |",
        "|---|---|---|---|---|---|---|",
    ]
    totals = [0.0, 0.0, 0.0]
    for rule, group in sorted(rules.items(), key=lambda item: -sum(j.hours * max(j.gpus, 1) for j in item[1])):
        gpu_h = sum(j.hours * j.gpus for j in group)
        estimate = gpu_h / MARGIN if rule in GPU_RULES_WITH_ESTIMATES else gpu_h
        core_h = sum(j.hours * j.cores for j in group if not j.gpus)
        totals = [totals[0] + gpu_h, totals[1] + estimate, totals[2] + core_h]
        lines.append(
            f"| {rule} | {len(group)} | {max(j.hours for j in group):.1f} | {gpu_h:.1f} | {estimate:.1f} "
            f"| {core_h:.1f} | {max(j.mem_mb for j in group) / 1000:.0f} |"
        )
    lines.append(f"| **total** | {len(jobs)} | | {totals[0]:.1f} | {totals[1]:.1f} | {totals[2]:.1f} | |")
    length, chain = critical_path(jobs)
    wall = list_schedule(jobs, args.gpus, args.cpu_nodes * args.cores_per_node)
    path = " → ".join(f"{j.rule}({j.wildcards})" if j.wildcards else j.rule for j in chain if j.hours)
    return "\n".join(
        [
            *lines,
            "",
            f"Critical path: **{length:.1f} h** of requests: {path}.",
            "",
            f"Wall time on {args.gpus} GPUs and {args.cpu_nodes} CPU nodes of {args.cores_per_node} cores (a list "
            f"schedule, longest ready job first, every job taking its whole request): **{wall:.1f} h**.",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configfile", nargs="+", required=True, help="the full-scale command's config files")
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--cpu-nodes", type=int, default=4)
    parser.add_argument("--cores-per-node", type=int, default=32)
    parser.add_argument("--dry-run-output", help="a saved dry run's output to read instead of running one")
    parser.add_argument("--out", help="write the page's table here (default: print it)")
    args = parser.parse_args()
    text = Path(args.dry_run_output).read_text() if args.dry_run_output else dry_run(args.configfile)
    page = table(parse_jobs(text), args)
    if args.out:
        Path(args.out).write_text(page + "\n")
    print(page)


if __name__ == "__main__":
    main()
