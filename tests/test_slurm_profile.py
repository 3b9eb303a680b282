"""The SLURM profile (profiles/slurm) end to end without a cluster: the real workflow through the real
snakemake-executor-plugin-slurm, with fake ``sbatch``, ``srun``, ``sacct``, ``squeue``, ``scancel``, ``sinfo``
and ``scontrol`` on PATH. The fake sbatch records each submission's options and runs the job script (the
plugin's ``--wrap`` command: Snakemake's jobstep, which calls srun) here; sacct / squeue report the states in
the formats the plugin parses. Checked: the report is built, training asks SLURM for a GPU and the memory / time
its rule computes for the job (src/longrank/plan/job_resources.py), and a job SLURM kills for memory is resubmitted
asking for more."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO, snakemake_command, synthetic_collection, write_local_collection
from longrank.config.files import merged
from longrank.plan import build_plan
from longrank.plan.job_resources import WHOLE_COLLECTION_MINUTES, JobResources, Request, collection_stage_minutes
from longrank.validation.validate import validate_config

pytestmark = pytest.mark.e2e
PROFILE = REPO / "profiles" / "slurm"

# One program for every fake SLURM command, dispatched on the name it is called by (symlinks in tmp/bin).
# State lives in $FAKE_SLURM_DIR: jobid counter, one JSON file per job (name, comment, state), and the
# submissions (sbatch.jsonl) and job steps (srun.jsonl) as they were called.
FAKE_SLURM = r"""
import fcntl, json, os, re, subprocess, sys, time
from pathlib import Path

STATE = Path(os.environ["FAKE_SLURM_DIR"])
CMD = Path(sys.argv[0]).name
ARGS = sys.argv[1:]


def locked_append(name, record):
    with open(STATE / name, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(json.dumps(record) + "\n")


def next_jobid():
    with open(STATE / "counter", "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        jobid = int(f.read().strip() or 1000) + 1
        f.seek(0)
        f.truncate()
        f.write(str(jobid))
    return str(jobid)


def jobs():
    for path in sorted(STATE.glob("job_*.json")):
        yield json.loads(path.read_text())


def set_state(jobid, **fields):
    path = STATE / f"job_{jobid}.json"
    record = json.loads(path.read_text()) if path.exists() else {"jobid": jobid}
    record.update(fields)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, path)  # sacct never reads half a file


def option_value(flag):
    for i, arg in enumerate(ARGS):
        if arg == flag and i + 1 < len(ARGS):
            return ARGS[i + 1]
        if arg.startswith(flag + "="):
            return arg[len(flag) + 1:]
    return None


def sbatch():
    # sbatch --parsable --job-name ID --output LOG --export=ALL --comment C [-A acct] -p part -t MIN --mem MB
    #        (--ntasks=1 | --gpus=N ...) --cpus-per-task=N -D DIR --wrap="COMMAND"  (the plugin's order)
    with_value = {"--job-name", "--output", "--comment", "-A", "-p", "-t", "--mem", "--mem-per-cpu", "-D", "-C",
                  "--clusters"}
    options, i = {}, 0
    while i < len(ARGS):
        arg = ARGS[i]
        if arg in with_value:
            options[arg.lstrip("-")] = ARGS[i + 1]
            i += 2
            continue
        if arg.startswith("-") and "=" in arg:
            key, value = arg.split("=", 1)
            options[key.lstrip("-")] = value
        elif arg.startswith("-"):
            options[arg.lstrip("-")] = True
        i += 1
    if "parsable" not in options or "wrap" not in options:
        sys.exit("sbatch: error: the fake expects --parsable and --wrap")
    jobid = next_jobid()
    attempt = re.search(r"--attempt\s+(\d+)", options["wrap"])
    attempt = int(attempt.group(1)) if attempt else None
    locked_append("sbatch.jsonl", {"jobid": jobid, "argv": ARGS, "options": options, "attempt": attempt,
                                   "time": time.time()})
    comment = options.get("comment", "")
    set_state(jobid, name=options["job-name"], comment=comment, state="PENDING")
    # FAKE_SLURM_OOM=rule_train: the first attempt of those jobs is killed by SLURM for its memory
    oom = os.environ.get("FAKE_SLURM_OOM")
    if oom and (comment == oom or comment.startswith(oom + "_")) and attempt == 1:
        set_state(jobid, state="OUT_OF_MEMORY")
        print(jobid)
        return
    set_state(jobid, state="RUNNING", start=time.time())
    log = Path(options["output"].replace("%j", jobid))
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SLURM_JOB_ID": jobid, "SLURM_JOBID": jobid, "SLURM_JOB_NAME": options["job-name"],
           "SLURM_CPUS_PER_TASK": str(options.get("cpus-per-task", 1))}
    if options.get("gpus"):
        env["SLURM_GPUS"] = str(options["gpus"])
    # The job runs before sbatch returns (as on an idle cluster that starts it at once): the plugin finds it
    # finished at its first status check.
    with open(log, "w") as out:
        done = subprocess.run(["/bin/sh", "-c", options["wrap"]], cwd=options.get("D"), env=env,
                              stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    set_state(jobid, state="COMPLETED" if done.returncode == 0 else "FAILED", exit_code=done.returncode,
              end=time.time())
    print(jobid)


def srun():
    # srun -n1 --cpu-bind=q --cpus-per-task=N [--gpus=N] --nodes=1 COMMAND...: run COMMAND in this allocation
    i = 0
    while i < len(ARGS) and ARGS[i].startswith("-"):
        i += 1
    locked_append("srun.jsonl", {"job": os.environ.get("SLURM_JOB_ID"), "options": ARGS[:i]})
    os.execvp(ARGS[i], ARGS[i:])


def status(name):
    for job in jobs():
        if name is None or job["name"] == name:
            print(f"{job['jobid']}|{job['state']}")


def sacct():
    # Status: sacct -X --parsable2 --clusters all --noheader --format=JobIdRaw,State --starttime T
    #         --endtime now --name RUNID  ->  "<jobid>|<STATE>" per line
    if option_value("--format") == "JobIdRaw,State":
        status(option_value("--name"))
    # Anything else (a failed job's step reasons: sacct -j ID.N --format=Reason --noheader; the account
    # guess: sacct -nu USER -o Account%256): nothing known, like a cluster without accounting detail
    return


def squeue():
    # squeue --format=%i|%T --states=all --noheader --name RUNID  ->  "<jobid>|<STATE>"
    status(option_value("--name"))


def scancel():
    for jobid in (a for a in ARGS if not a.startswith("-")):
        if (STATE / f"job_{jobid}.json").exists():
            set_state(jobid, state="CANCELLED")
    locked_append("scancel.jsonl", {"argv": ARGS})


def sinfo():
    # sinfo -o %P: partitions, the default one starred
    print("PARTITION\ncpu*\ngpu")


def scontrol():
    # scontrol show config (MaxArraySize for array jobs, MinJobAge for the choice of status command)
    if ARGS[:2] == ["show", "config"]:
        print("MaxArraySize            = 1001\nMinJobAge               = 300 sec")


{"sbatch": sbatch, "srun": srun, "sacct": sacct, "squeue": squeue, "scancel": scancel, "sinfo": sinfo,
 "scontrol": scontrol}[CMD]()
"""
FAKE_COMMANDS = ("sbatch", "srun", "sacct", "squeue", "scancel", "sinfo", "scontrol")


def fake_slurm(tmp_path: Path) -> tuple[Path, Path]:
    """tmp/bin with the fake commands (sharing one script) and the state directory they write to."""
    bin_dir, state = tmp_path / "bin", tmp_path / "slurm"
    bin_dir.mkdir()
    state.mkdir()
    script = bin_dir / "fake_slurm.py"
    script.write_text(f"#!{sys.executable}\n{FAKE_SLURM}")
    script.chmod(0o755)
    for name in FAKE_COMMANDS:
        (bin_dir / name).symlink_to(script)
    return bin_dir, state


def tiny_config(tmp_path: Path) -> Path:
    """A synthetic collection and every model but KNRM off: the whole DAG in a few small jobs."""
    docs, queries, qrels = synthetic_collection()
    dataset = write_local_collection(tmp_path / "collection", docs, queries, qrels)
    defaults = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config = {
        "dataset": dataset,  # replaces the default's `dataset: cranfield` whole
        "first_stages": [{"name": "bm25", "method": "bm25", "top_k": 30}],
        "rerank_depth": 20,
        "device": "auto",  # asks SLURM for a GPU; without one here, `auto` trains on the CPU
        "evaluation": {"bootstrap": 200},
        "bench": {"lengths": [50], "repeats": 1, "batch_size": 4},
        "mores_speed": {"enabled": False},
        "attention_scaling": {"enabled": False},
        "models": {m: {"enabled": False} for m in defaults["models"] if m != "knrm"}
        # no interpolation: two jobs fewer on the critical path (each SLURM job starts Snakemake twice)
        | {"knrm": {"interpolate": False, "train": {"steps": 10, "batch_size": 4, "eval_every": 5, "patience": 2}}},
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


class JobInput:
    """A job's named inputs as a profile expression sees them (``input.shards``): only what the profile reads."""

    def __init__(self, shards: list[str]):
        self.shards = shards


#: the rules whose job with input shards is a merge that indexes on a CPU: no GPU, the profile's cpu partition
MERGES_ON_A_CPU = {"hdct", "artifacts"}


def profile_value(rule: str, resource: str, attempt: int = 1, merge: bool = False):
    """A resource as the profile sets it for ``rule`` (set-resources, else default-resources): a Python expression
    over ``attempt`` and the job's ``input`` (``merge``: a job with input shards) evaluated as Snakemake does, or the
    plain string (a partition name)."""
    profile = yaml.safe_load((PROFILE / "config.yaml").read_text())
    value = {**profile["default-resources"], **profile["set-resources"].get(rule, {})}[resource]
    try:  # the repository's own profile
        return eval(str(value), {"attempt": attempt, "input": JobInput(["shard"] if merge else [])})
    except NameError:
        return value


# The rules whose runtime, mem_mb and constraint are computed per job (longrank.plan.job_resources), by the method of
# JobResources that computes them: the profile sets none of the three for them
PER_JOB = {"train": "train", "train_pretrain": "pretrain", "rerank": "rerank"}


def job_resources(*configfiles: str | Path) -> JobResources:
    """The requests of the run of ``--configfile *configfiles`` (over config/config.yaml), as its parse plans them."""
    config = validate_config(merged([str(path) for path in configfiles]))
    return JobResources(build_plan(config, f"results/{config['dataset']['name']}"))


def planned_request(jobs: JobResources, rule: str, model: str, attempt: int = 1) -> Request:
    return getattr(jobs, PER_JOB[rule])(model, attempt)


def sbatch_line(submission: dict) -> str:
    """The sbatch call as the plugin made it, less the job script, for assertion messages."""
    return "sbatch " + " ".join(a for a in submission["argv"] if not a.startswith("--wrap"))


@pytest.fixture(scope="module")
def slurm_run(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("slurm")
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "config").symlink_to(REPO / "config")  # `configfile:` resolves against the working directory
    bin_dir, state = fake_slurm(tmp_path)
    config = tiny_config(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_"))}
    env.update(
        PATH=f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}",
        FAKE_SLURM_DIR=str(state),
        FAKE_SLURM_OOM="rule_train",
        OMP_NUM_THREADS="1",
    )
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(workdir),
        "--profile",
        str(PROFILE),
        "report",
        "--configfile",
        str(config),
        # the test machine's pace: two jobs at a time, one thread each, quick status checks
        "--jobs",
        "2",
        "--latency-wait",
        "5",
        "--set-threads",
        "train=1",
        "rerank=1",
        "artifacts=1",
        "bench=1",
        "--seconds-between-status-checks",
        "1",
        "--slurm-init-seconds-before-status-checks",
        "1",
        "--prioritize",
        "results/tiny/eval/knrm.tsv",  # the critical path (train, rerank, evaluate) first
        "--slurm-keep-successful-logs",
    ]
    done = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        logs = "\n".join(f"--- {p}\n{p.read_text()[-3000:]}" for p in sorted(workdir.rglob("*.log")))
        raise AssertionError(f"snakemake --profile slurm failed:\n{done.stdout[-6000:]}\n{done.stderr[-6000:]}\n{logs}")
    submissions, srun = (
        [json.loads(line) for line in (state / name).read_text().splitlines()]
        for name in ("sbatch.jsonl", "srun.jsonl")
    )
    return {
        "workdir": workdir,
        "submissions": submissions,
        "srun": srun,
        "output": done.stdout + done.stderr,
        "jobs": job_resources(config),
    }


def of_rule(submissions: list[dict], rule: str) -> list[dict]:
    return [s for s in submissions if s["options"]["comment"].split("_wildcards_")[0] == f"rule_{rule}"]


def test_the_workflow_completes_through_sbatch(slurm_run):
    html = slurm_run["workdir"] / "results" / "tiny" / "report" / "index.html"
    assert html.exists() and "knrm" in html.read_text()
    rules = {s["options"]["comment"].split("_wildcards_")[0] for s in slurm_run["submissions"]}
    assert {"rule_data", "rule_candidates", "rule_train", "rule_rerank", "rule_evaluate", "rule_report"} <= rules
    for s in slurm_run["submissions"]:  # every job as the plugin submits it, with a memory and a time limit
        assert s["options"]["parsable"] is True and "--executor slurm-jobstep" in s["options"]["wrap"]
        assert "mem" in s["options"] and "t" in s["options"], sbatch_line(s)


def test_training_asks_for_a_gpu_and_its_jobs_memory_and_time(slurm_run):
    train = [s for s in of_rule(slurm_run["submissions"], "train") if s["attempt"] == 1]
    assert len(train) == 1
    options, line = train[0]["options"], sbatch_line(train[0])
    assert int(options.get("gpus", 0)) >= 1 or "gpu" in options.get("gres", ""), f"no GPU asked for: {line}"
    assert options["p"] == profile_value("train", "slurm_partition"), line
    request = planned_request(slurm_run["jobs"], "train", "knrm")
    assert (int(options["mem"]), int(options["t"])) == (request.mem_mb, request.runtime), line
    assert "C" not in options and "constraint" not in options, line  # no large_gpu_constraint configured
    assert int(options["cpus-per-task"]) == profile_value("train", "cpus_per_task"), line
    # the job step inside the allocation gets the GPU too (the jobstep's srun --gpus=N)
    train_ids = {s["jobid"] for s in of_rule(slurm_run["submissions"], "train")}
    assert any(r["job"] in train_ids and any(o.startswith("--gpus=") for o in r["options"]) for r in slurm_run["srun"])
    # and a CPU step does not hold a GPU
    data = of_rule(slurm_run["submissions"], "data")[0]
    assert "gpus" not in data["options"] and "gres" not in data["options"], sbatch_line(data)
    assert data["options"]["p"] == profile_value("data", "slurm_partition"), sbatch_line(data)


def test_a_job_killed_for_memory_is_resubmitted_asking_for_more(slurm_run):
    train = sorted(of_rule(slurm_run["submissions"], "train"), key=lambda s: s["attempt"])
    assert [s["attempt"] for s in train] == [1, 2], "OUT_OF_MEMORY on attempt 1, then one retry that completes"
    first, retry = train[0]["options"], train[1]["options"]
    lines = f"{sbatch_line(train[0])}\nthen\n{sbatch_line(train[1])}"
    assert int(retry["mem"]) > int(first["mem"]) or int(retry["t"]) > int(first["t"]), f"no escalation:\n{lines}"
    request = planned_request(slurm_run["jobs"], "train", "knrm", attempt=2)
    assert (int(retry["mem"]), int(retry["t"])) == (request.mem_mb, request.runtime), lines
    assert int(retry.get("gpus", 0)) >= 1 or "gpu" in retry.get("gres", ""), lines
    assert "OUT_OF_MEMORY" in slurm_run["output"]


# ---- the rehearsal's DAG under the profile: every job's resources as the real TREC DL run gets them ---------------
GPU_RULES = {
    "train",
    "train_pretrain",
    "rerank",
    "bench",
    "artifacts",
    "artifacts_shard",
    "hdct",
    "hdct_encoder",
    "hdct_shard",
    "mores_speed",
    "mir_speed",
    "attention_scaling",
}


def gpu_rules() -> set[str]:
    """The rules whose resources ask for a GPU (``gpu=`` in workflow/rules/*.smk), and those made from one of them by
    ``use rule ... as ...`` (train_pretrain from train)."""
    found, uses = set(), []
    for path in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        text = path.read_text()
        for block in re.split(r"^(?=rule \w+:)", text, flags=re.M):
            name = re.match(r"rule (\w+):", block)
            if name and re.search(r"^\s+gpu=", block, re.M):
                found.add(name.group(1))
        uses += re.findall(r"^use rule (\w+) as (\w+)", text, flags=re.M)
    return found | {new for base, new in uses if base in found}


def test_every_rule_that_asks_for_a_gpu_runs_on_the_profiles_gpu_partition():
    """HDCT's job (a BERT encoder trained and run over the collection) had no entry: the cpu partition, asking for a
    GPU, with the default hour. Each GPU rule has the profile's gpu partition and a time of its own: the profile's, or
    the rule's per job (a model's, or one job's against a merge of shards), which a profile value would replace."""
    profile = yaml.safe_load((PROFILE / "config.yaml").read_text())
    assert gpu_rules() == GPU_RULES
    for rule in sorted(GPU_RULES):
        assert profile_value(rule, "slurm_partition") == "gpu", rule
        if rule in MERGES_ON_A_CPU:  # the merge of its shards: the cpu partition
            assert profile_value(rule, "slurm_partition", merge=True) == profile_value("data", "slurm_partition")
        own = profile["set-resources"][rule]
        if rule in PER_JOB:
            assert not {"runtime", "mem_mb", "constraint"} & set(own), rule
        elif rule in WHOLE_COLLECTION_MINUTES:  # the rule's time: one job's, or its shards' merge's
            assert "runtime" not in own, rule
        else:
            assert "runtime" in own, rule


def dry_run_jobs(workdir: Path, combo: tuple[str, ...]) -> dict[tuple[str, str], dict[str, str]]:
    """(rule, wildcards) -> resources of every job of ``snakemake --profile profiles/slurm -n report`` (no data needed:
    the resources are what the plugin would pass to sbatch for the first attempt)."""
    workdir.mkdir()
    (workdir / "config").symlink_to(REPO / "config")
    cmd, env = snakemake_command(workdir, "--profile", str(PROFILE), "-n", "report", "--configfile", *combo)
    env["IR_DATASETS_HOME"] = str(workdir / "ir_datasets")  # empty: a dry run reads no data
    done = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    jobs = {}
    for block in re.split(r"^(?=(?:local)?rule \w+:)", done.stdout + done.stderr, flags=re.M):
        rule = re.match(r"(?:local)?rule (\w+):", block)
        resources = re.search(r"^\s+resources: (.*)$", block, re.M)
        if rule and resources:
            wildcards = re.search(r"^\s+wildcards: (.*)$", block, re.M)
            key = (rule.group(1), wildcards.group(1) if wildcards else "")
            jobs[key] = dict(item.split("=", 1) for item in resources.group(1).split(", "))
    return jobs


@pytest.fixture(scope="module")
def rehearsal_resources(tmp_path_factory):
    from rehearsal import full_scale, rehearsal

    root = tmp_path_factory.mktemp("slurm_dry")
    return {
        kind: dry_run_jobs(root / kind, combo("2019")) for kind, combo in (("full", full_scale), ("mine", rehearsal))
    }


def test_the_rehearsal_asks_slurm_for_what_the_real_run_does(rehearsal_resources):
    full, mine = rehearsal_resources["full"], rehearsal_resources["mine"]

    def by_rule(jobs):
        """Rule -> its jobs' distinct resources. Jobs compared by rule: a floor is one per distinct (depth, words read)
        of the models (sanity, evaluate), and those are size keys, so two shrunk models may share one."""
        out = {}
        for (rule, _), res in jobs.items():
            out.setdefault(rule, set()).add(tuple(sorted(res.items())))
        return out

    def shared(jobs):
        """Jobs less the resources computed per job (the rehearsal's shrunk models train for less time)."""
        return {
            key: {k: v for k, v in res.items() if key[0] not in PER_JOB or k != "runtime"} for key, res in jobs.items()
        }

    assert by_rule(shared(mine)) == by_rule(shared(full)) and len(mine) > 100
    assert set(by_rule(mine)) >= GPU_RULES - {"train_pretrain", "hdct"}  # neither in the TREC DL configs yet
    profile = yaml.safe_load((PROFILE / "config.yaml").read_text())
    for (rule, wildcards), res in mine.items():
        job = f"{rule} {wildcards}"
        if rule in ("all", "report"):
            continue
        # a merge of shards: a job of a rule whose shard jobs carry its wildcards and a shard number
        merge = rule in MERGES_ON_A_CPU and any(
            r == f"{rule}_shard" and w.startswith(f"{wildcards}, ") for r, w in mine
        )
        assert res["slurm_partition"] == str(profile_value(rule, "slurm_partition", merge=merge)), job
        if rule in PER_JOB:
            continue  # test_the_full_scale_jobs_ask_slurm_for_their_own_time
        if "mem_mb" in profile["set-resources"].get(rule, {}):
            assert int(res["mem_mb"]) == profile_value(rule, "mem_mb"), job
        if rule in WHOLE_COLLECTION_MINUTES:  # the rule's time: a merge's (the rehearsal's shards) or one job's
            assert int(res["runtime"]) in {collection_stage_minutes(rule, merges, 1) for merges in (True, False)}, job
        else:
            assert int(res["runtime"]) == profile_value(rule, "runtime"), job
        if rule in GPU_RULES:  # device: auto asks for one GPU (train.processes 1), a merge on a CPU for none
            assert res.get("gpu") == ("0" if merge else "1"), job
        else:
            assert "gpu" not in res, job
        if "cpus_per_task" in profile["set-resources"].get(rule, {}):
            assert int(res["cpus_per_task"]) == profile_value(rule, "cpus_per_task"), job


def test_the_full_scale_jobs_ask_slurm_for_their_own_time(rehearsal_resources):
    """The dry run's train and rerank jobs of TREC DL 2019 ask for what longrank.plan.job_resources computes for
    them: a time per model (MIR's training over 24 h, KNRM's the 30-minute floor), no constraint without
    large_gpu_constraint."""
    from rehearsal import full_scale

    jobs = job_resources(*full_scale("2019"))
    asked = {}
    for (rule, wildcards), res in rehearsal_resources["full"].items():
        if rule in PER_JOB:
            model = re.search(r"model=([^,]+)", wildcards).group(1)
            request = planned_request(jobs, rule, model)
            assert (int(res["runtime"]), int(res["mem_mb"])) == (request.runtime, request.mem_mb), (rule, wildcards)
            assert "constraint" not in res, (rule, wildcards)
            asked[rule, model] = int(res["runtime"])
    assert asked["train", "mir"] > asked["train", "mores"] > asked["train", "knrm"] == 30
