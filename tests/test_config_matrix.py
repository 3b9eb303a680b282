"""Every config under config/ builds its DAG over the bases its first line names (``# Overlay over: ...``,
longrank.config.files), and so does every combination the README, docs/ and the configs' comments document:
`snakemake -n` over the default config, without the data (an empty IR_DATASETS_HOME; local collections as empty
placeholder files), so that a config nobody has run yet still parses, validates and resolves every rule's inputs.
The combinations come from the headers and the documents, never from a hand list: a new overlay is in the matrix
once its header is written, and an overlay without one, or naming a base that does not exist, fails here."""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from conftest import REPO, DryRun, dry_runs
from longrank.validation.validate import resolve_likes, validate_config
from longrank.config.files import (
    DEFAULT_CONFIG,
    check_command_line,
    check_order,
    configfiles,
    merged,
    overlays,
    read_overlay,
)
from longrank.errors import InputError
from longrank.config.model_types import capabilities
from rehearsal import DEV, RUNS, YEARS, full_scale, rehearsal

pytestmark = pytest.mark.stage  # a model, a stage or the workflow runs: not a unit test

CONFIG = REPO / "config"
OVERLAYS = {overlay.path: overlay for overlay in overlays()}  # a missing header or base fails collection, naming it


def documented_combinations() -> dict[tuple[str, ...], str]:
    """Every `--configfile config/a.yaml config/studies/b.yaml ...` in the README, docs/ (the studies' commands),
    config/README.md, the configs' comments and the profiles, with the first file that writes it."""
    found = {}
    documents = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")), *sorted(CONFIG.rglob("*.md"))]
    for path in [*documents, *sorted(CONFIG.rglob("*.yaml")), *sorted((REPO / "profiles").rglob("*.yaml"))]:
        for match in re.finditer(r"--configfile((?:\s+config/[\w./-]+\.yaml)+)", path.read_text()):
            combo = tuple(match.group(1).split())
            if set(combo) - {DEFAULT_CONFIG}:
                found.setdefault(combo, str(path.relative_to(REPO)))
    return found


# The default alone, each runnable overlay over its stated bases (a base only, config/trec-dl.yaml, runs under the
# overlays over it), then each documented combination; each a `--configfile` line merged over config/config.yaml.
DOCUMENTED = documented_combinations()


def with_a_year(files: tuple[str, ...]) -> tuple[str, ...]:
    """An overlay over config/trec-dl.yaml runs with a year between (its header's second line says so): alone,
    config/trec-dl.yaml's models would run on the default collection, whose fields NDRM's full-scale entries refuse."""
    # a year, or the Dev run (a year's sibling: its own test queries over the same settings)
    if "config/trec-dl.yaml" not in files or any(
        f.startswith(("config/trec-dl-20", "config/trec-dl-dev")) for f in files
    ):
        return files
    at = files.index("config/trec-dl.yaml") + 1
    return (*files[:at], "config/trec-dl-2019.yaml", *files[at:])


COMBINATIONS: list[tuple[str, ...]] = list(
    dict.fromkeys(
        [
            (),
            *(with_a_year(configfiles(path)) for path, overlay in OVERLAYS.items() if not overlay.base_only),
            *DOCUMENTED,
        ]
    )
)


def combo_id(combo: tuple[str, ...]) -> str:
    return "+".join(Path(c).stem for c in combo) or "default"


def merged_config(combo: tuple[str, ...]) -> dict:
    """The config Snakemake sees for ``--configfile *combo`` (config_files.merged: Snakemake's own merge)."""
    return merged(combo)


def placeholder_collection(workdir: Path, combo: tuple[str, ...]) -> None:
    """A local collection's files are inputs of the data rule: empty files stand in for them (a dry run
    never reads them). Paths are relative to the working directory, as a user's run resolves them."""
    dataset = validate_config(merged_config(combo))["dataset"]
    if dataset.get("source") == "local":
        for key in ("docs", "queries", "qrels"):
            path = Path(dataset[key])
            if not path.is_absolute():
                (workdir / path).parent.mkdir(parents=True, exist_ok=True)
                (workdir / path).touch()


def prepare(combo: tuple[str, ...], root: Path) -> tuple[str, list[str]]:
    """The combination's working directory and Snakemake arguments."""
    workdir = root / combo_id(combo)
    workdir.mkdir()
    (workdir / "config").symlink_to(CONFIG)  # `configfile: "config/config.yaml"` resolves against the working directory
    placeholder_collection(workdir, combo)
    argv = ["-s", str(REPO / "Snakefile"), "-d", str(workdir), "--cores", "1", "--quiet", "rules"]
    if combo:
        argv += ["--configfile", *combo]
    return str(workdir), argv


def dry_run_env(root: Path) -> dict:
    """The dry runs' environment: an empty ir_datasets home under ``root`` (a dry run must not need any data) and this
    interpreter's bin directory first."""
    empty_home = root / "ir_datasets"
    empty_home.mkdir()
    return {
        **os.environ,
        "IR_DATASETS_HOME": str(empty_home),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }


@pytest.fixture(scope="module")
def matrix() -> dict[tuple[str, ...], DryRun]:
    """Every combination's dry run, batched (conftest.dry_runs: Snakemake and the models imported once)."""
    with tempfile.TemporaryDirectory(prefix="config_matrix_") as root:
        jobs = {combo_id(combo): prepare(combo, Path(root)) for combo in COMBINATIONS}
        done = dry_runs(jobs, Path(root) / "logs", dry_run_env(Path(root)))
        yield {combo: done[combo_id(combo)] for combo in COMBINATIONS}


@pytest.mark.parametrize("combo", COMBINATIONS, ids=combo_id)
def test_dry_run_builds_the_dag(matrix, combo):
    done = matrix[combo]
    output = done.output
    args = " ".join(combo) or "(default)"
    if done.returncode != 0:
        pytest.fail(
            f"snakemake -n --configfile {args} failed (exit {done.returncode}):\n{output[-6000:]}", pytrace=False
        )
    # Non-strict DAG evaluation logs an input function's exception and goes on: a config that only works
    # because Snakemake swallows an error is a bug waiting for the strict mode.
    if "Exception" in output:
        pytest.fail(f"snakemake -n --configfile {args} logged an exception:\n{output[-6000:]}", pytrace=False)
    totals = [int(line.split()[1]) for line in output.splitlines() if re.fullmatch(r"total\s+\d+", line.strip())]
    assert totals and totals[0] > 0, f"snakemake -n --configfile {args} planned no jobs:\n{output[-3000:]}"


def test_every_overlays_bases_come_with_their_own_bases_before_them():
    """A header's list is a whole --configfile line: config/studies/hdct-irled.yaml over config/studies/hdct.yaml
    names config/irled.yaml too, where hdct's own bases ask for it."""
    for path in OVERLAYS:
        check_order(configfiles(path))


@pytest.mark.parametrize("combo", COMBINATIONS, ids=combo_id)
def test_each_combination_merges_every_overlay_over_its_bases_and_ends_in_a_run(combo):
    """No overlay alone without its bases (config/studies/pretrain-irled.yaml alone fails validation), and no
    command ending in a base only (config/trec-dl.yaml without a year is Cranfield with the papers' settings)."""
    where = DOCUMENTED.get(combo, "the headers")
    try:
        check_order(combo)
    except InputError as err:
        pytest.fail(f"{where}: {err}", pytrace=False)
    assert not combo or not OVERLAYS[combo[-1]].base_only, f"{where}: {combo[-1]} is a base only, not a run"


def test_the_documents_write_commands():
    assert DOCUMENTED, "no `--configfile` line found in README.md, docs/**/*.md or config/**/*.yaml"
    assert ("config/trec-dl.yaml", "config/trec-dl-2019.yaml") in DOCUMENTED


@pytest.mark.parametrize(
    "header, problem",
    [
        ("models: {}", "config/studies/x.yaml, line 1: an overlay's first line names what it is merged over"),
        ("# Overlay over: config/irled.yaml", "config/studies/x.yaml, line 1: the bases start with config/config.yaml"),
        (
            "# Overlay over: config/config.yaml config/irled.yml",
            "config/studies/x.yaml, line 1: names bases that do not exist: config/irled.yml",
        ),
    ],
)
def test_an_overlay_without_a_header_or_with_a_missing_base_is_named(tmp_path, header, problem):
    (tmp_path / "config" / "studies").mkdir(parents=True)
    (tmp_path / "config/config.yaml").write_text("{}\n")
    (tmp_path / "config/irled.yaml").write_text("# Overlay over: config/config.yaml\n{}\n")
    (tmp_path / "config/studies/x.yaml").write_text(f"{header}\nmodels: {{}}\n")
    with pytest.raises(InputError) as err:
        overlays(tmp_path)
    assert problem in str(err.value)


def test_a_base_only_is_marked_and_a_line_missing_a_base_is_named():
    assert OVERLAYS["config/trec-dl.yaml"].base_only and not OVERLAYS["config/irled.yaml"].base_only
    assert read_overlay("config/studies/pretrain-irled.yaml").bases == (
        "config/config.yaml",
        "config/irled.yaml",
        "config/studies/pretrain.yaml",
    )
    with pytest.raises(InputError) as err:
        check_order(["config/studies/pretrain.yaml", "config/irled.yaml", "config/studies/pretrain-irled.yaml"])
    assert str(err.value) == (
        "--configfile config/studies/pretrain.yaml config/irled.yaml config/studies/pretrain-irled.yaml: "
        "config/studies/pretrain-irled.yaml is merged over config/config.yaml config/irled.yaml "
        "config/studies/pretrain.yaml, in that order"
    )


def test_the_workflow_names_an_overlay_run_without_its_bases_before_validating(tmp_path):
    """common.smk checks the run's --configfile files (check_command_line): shipped overlays after their bases, a
    base-only file never last; a user's own files (outside config/) anywhere."""
    own = tmp_path / "mine.yaml"
    own.write_text("dataset: cranfield\n")
    check_command_line([REPO / "config/irled.yaml", own, REPO / "config/studies/mir.yaml"])  # passes
    check_command_line([REPO / "config/trec-dl.yaml", own])  # the user's own year over the base
    with pytest.raises(InputError, match="pretrain-irled.yaml is merged over config/config.yaml config/irled.yaml"):
        check_command_line([REPO / "config/studies/pretrain-irled.yaml"])
    with pytest.raises(InputError, match="ends with config/trec-dl.yaml, a base only") as err:
        check_command_line([REPO / "config/trec-dl.yaml"])
    assert "e.g. --configfile config/trec-dl.yaml config/trec-dl-" in str(err.value)
    cmd = [sys.executable, "-m", "snakemake", "-n", "report", "--configfile", "config/studies/pretrain-irled.yaml"]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    assert done.returncode != 0
    assert "pretrain-irled.yaml is merged over config/config.yaml config/irled.yaml" in done.stdout + done.stderr


def test_config_readmes_table_says_what_each_config_is_merged_over():
    """config/README.md's table of configs, row by row, against the headers (paths there are relative to config/)."""
    tabled = {}
    for line in (CONFIG / "README.md").read_text().splitlines():
        cells = line.split("|")[1:-1]
        if len(cells) == 3 and cells[0].strip().startswith("`"):
            for name in re.findall(r"`([\w./-]+\.yaml)`", cells[0]):
                tabled[f"config/{name}"] = tuple(
                    f"config/{base}" for base in " ".join(re.findall(r"`([^`]+)`", cells[1])).split()
                )
    stated = {path: overlay.bases for path, overlay in OVERLAYS.items()}
    assert tabled == {DEFAULT_CONFIG: (), **stated}


def test_the_trec_dl_years_differ_only_in_their_judged_queries():
    """One base (config/trec-dl.yaml) holds the papers' settings; a year adds its collection and nothing else."""
    years = {year: validate_config(merged_config(configfiles(f"config/trec-dl-{year}.yaml"))) for year in (2019, 2020)}
    differing = {key for key in years[2019].keys() | years[2020].keys() if years[2019].get(key) != years[2020].get(key)}
    assert differing == {"dataset"}
    assert [years[year]["dataset"]["name"] for year in years] == ["trec-dl-2019", "trec-dl-2020"]
    assert yaml.safe_load((CONFIG / "trec-dl-2019.yaml").read_text()) == {"dataset": "trec-dl-2019"}


def test_like_starts_from_the_named_entry_merged_key_by_key_but_not_its_enabled():
    models = {
        "a": {"type": "tk", "enabled": False, "max_doc_len": 100, "train": {"steps": 5, "lr": 0.1}},
        "b": {"like": "c", "train": {"lr": 0.2}},
        "c": {"like": "a", "max_doc_len": 200},
    }
    resolve_likes(models)
    assert models["c"] == {"type": "tk", "max_doc_len": 200, "train": {"steps": 5, "lr": 0.1}, "like": "a"}
    assert models["b"] == {"type": "tk", "max_doc_len": 200, "train": {"steps": 5, "lr": 0.2}, "like": "c"}
    assert models["a"] == {"type": "tk", "enabled": False, "max_doc_len": 100, "train": {"steps": 5, "lr": 0.1}}
    models["b"]["train"]["steps"] = 9  # a copy, not the entry it started from
    assert models["c"]["train"]["steps"] == 5
    resolved = copy.deepcopy(models)
    resolve_likes(resolved)  # resolving again (the entries keep their base's name) changes nothing
    assert resolved == models


@pytest.mark.parametrize(
    "models, message",
    [
        (
            {"a": {"like": "nope"}},
            "config key models.a.like: expected the name of another configured model; got 'nope'",
        ),
        (
            {"a": {"like": "b"}, "b": {"like": "a"}},
            "config key models.b.like: the entries are like each other in a circle (a -> b -> a)",
        ),
        ({"a": {"like": "a"}}, "config key models.a.like: the entries are like each other in a circle (a -> a)"),
    ],
)
def test_a_bad_like_names_the_key(models, message):
    with pytest.raises(InputError) as err:
        resolve_likes(models)
    assert message in str(err.value)


@pytest.mark.parametrize("combo", [c for c in COMBINATIONS if "config/studies/mir.yaml" in c], ids=combo_id)
def test_mir_ablations_differ_from_mir_only_in_the_keys_they_name(combo):
    """Over any collection's config, each ablation row changes only what config/studies/mir.yaml says it changes (not
    the document length of another collection), and BERT-MaxP reads as many tokens as MIR."""
    models = validate_config(merged_config(combo))["models"]
    ref = models["mir"]
    for name, own in yaml.safe_load((CONFIG / "studies" / "mir.yaml").read_text())["models"].items():
        if own.get("like") == "mir":
            entry = models[name]
            assert entry["like"] == "mir"
            assert {k for k in set(entry) | set(ref) if entry.get(k) != ref.get(k)} == set(own), name
    assert (
        models["bert_maxp128"]["enabled"]
        and capabilities(models["bert_maxp128"]).document_budget == ref["max_doc_tokens"]
    )


@pytest.mark.parametrize(
    "combo", [configfiles("config/trec-dl-2019.yaml"), configfiles("config/trec-dl-2020.yaml")], ids=combo_id
)
def test_full_scale_entries_rerank_the_configs_depth_not_the_defaults_cpu_sized_one(combo):
    config = merged_config(combo)
    depth = config["rerank_depth"]
    leaked = {
        name: entry["rerank_depth"]
        for name, entry in config["models"].items()
        if entry.get("rerank_depth", depth) != depth
    }
    assert not leaked, f"entries that kept config/config.yaml's rerank_depth over {combo}: {leaked}"


@pytest.mark.parametrize("combo", [c for c in COMBINATIONS if "config/studies/pretrain.yaml" in c], ids=combo_id)
def test_each_pretrained_row_is_its_default_entry_with_a_pretraining_block(combo):
    models = validate_config(merged_config(combo))["models"]
    for name in yaml.safe_load((CONFIG / "studies" / "pretrain.yaml").read_text())["models"]:
        entry, default = models[name], models[name.removesuffix("_pretrained")]
        assert entry["train"].pop("pretrain") and entry.pop("like") == name.removesuffix("_pretrained")
        assert entry == default, name


def job_counts(output: str) -> dict[str, int]:
    """A dry run's "Job stats" table: rule -> jobs (the first table; -n prints it twice)."""
    table = output.split("Job stats:", 1)[1].split("total", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


@pytest.mark.parametrize("year", (*RUNS, DEV))
def test_the_rehearsal_runs_the_full_scale_dag(matrix, year):
    """config/studies/trec-dl-rehearsal.yaml (and the passage run's) only shrinks (tests/test_trec_dl_rehearsal.py checks its keys): its DAG
    has the full-scale run's rules with as many jobs each, and the same models of the same types. The untrained
    floors are the exception: one per distinct (depth, words read) of the models, both size keys, so two shrunk
    models may share a floor (its sanity job and its evaluation); and the annotation's and the graph set's shards, one
    job each of annotations.shards, mir_graphs.<set>.shards and an hdct first stage's shards, size keys (fewer in the
    rehearsal, more than one in both: the sharded DAG)."""
    full, mine = matrix[full_scale(year)], matrix[rehearsal(year)]
    assert full.returncode == 0 and mine.returncode == 0
    sized = ("sanity", "evaluate", "annotate_shard", "graphs_shard", "hdct_shard")
    counts = {rule: n for rule, n in job_counts(full.output).items() if rule not in sized}
    assert {rule: n for rule, n in job_counts(mine.output).items() if rule not in sized} == counts
    if "annotate" in counts:
        assert job_counts(mine.output)["annotate_shard"] == 3 < job_counts(full.output)["annotate_shard"]
    if "graphs" in counts:
        assert job_counts(mine.output)["graphs_shard"] == 3 < job_counts(full.output)["graphs_shard"]
    if "hdct" in counts:
        assert job_counts(mine.output)["hdct_shard"] == 3 < job_counts(full.output)["hdct_shard"]
    assert set(job_counts(mine.output)) == set(job_counts(full.output))
    assert "train" in job_counts(full.output) and "mores_speed" in job_counts(full.output)
    assert year not in YEARS or "attention_scaling" in job_counts(full.output)

    def types(combo):
        return {m: e["type"] for m, e in validate_config(merged_config(combo))["models"].items() if e["enabled"]}

    assert types(rehearsal(year)) == types(full_scale(year))


# Rules whose jobs run a model with torch on the CPU: their arithmetic, so their numbers, depend on the thread count
MODEL_RULES = {"train", "rerank", "artifacts", "bench", "mores_speed", "mir_speed"}


def printed_jobs(output: str) -> list[tuple[str, str, str]]:
    """(rule, wildcards, the job's block) of every job a dry run printed."""
    jobs = []
    for block in re.split(r"^(?=(?:local)?rule \w+:)", output, flags=re.M):
        rule = re.match(r"(?:local)?rule (\w+):", block)
        if rule:
            wildcards = re.search(r"^\s+wildcards: (.*)$", block, re.M)
            jobs.append((rule.group(1), wildcards.group(1) if wildcards else "", block))
    return jobs


def job_threads(output: str) -> dict[str, set[int]]:
    """Rule -> the threads of its jobs in a dry run's output (Snakemake prints ``threads: N`` only where N > 1)."""
    found: dict[str, set[int]] = {}
    for rule, _, block in printed_jobs(output):
        threads = re.search(r"^\s+threads: (\d+)$", block, re.M)
        found.setdefault(rule, set()).add(int(threads.group(1)) if threads else 1)
    return found


def test_model_jobs_run_on_one_thread_whatever_the_cores(tmp_path):
    """With two threads per job (before), `--cores 1` trained other weights than `--cores 2` (Snakemake lowers a rule's
    threads to the cores; the default config's TKL read nDCG@10 0.349 on two threads and 0.315 on one). On eight
    cores every model job still runs on one thread; `--set-threads train=3`, how a user asks for more, is the control."""
    base = ["-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "--cores", "8", "report"]
    (tmp_path / "config").symlink_to(CONFIG)
    done = dry_runs(
        {"eight": (tmp_path, base), "set": (tmp_path, [*base, "--set-threads", "train=3"])},
        tmp_path / "logs",
        dry_run_env(tmp_path),
    )
    assert {key: run.returncode for key, run in done.items()} == {"eight": 0, "set": 0}, done["eight"].output[-3000:]
    eight, asked = job_threads(done["eight"].output), job_threads(done["set"].output)
    assert set(eight) >= MODEL_RULES, sorted(eight)  # the default config runs every kind of model job
    assert {rule: eight[rule] for rule in MODEL_RULES} == {rule: {1} for rule in MODEL_RULES}
    assert asked["train"] == {3} and asked["rerank"] == {1}


def mir_models(combo: tuple[str, ...]) -> list[str]:
    models = validate_config(merged_config(combo))["models"]
    return [m for m, entry in models.items() if entry.get("enabled", True) and capabilities(entry).reads_graph_set]


def mir_chain_shape(combo: tuple[str, ...]) -> tuple:
    """What kinds of job MIR's chain holds in ``combo`` (longrank.plan.mir_chain): per MIR model, its first stage's method
    (and HDCT's targets), a pre-training set, its weights from another entry, its graph set's PRF queries and their
    index. Configurations of one shape have chains of the same rules."""
    config = validate_config(merged_config(combo))
    shape = set()
    for m in mir_models(combo):
        entry = config["models"][m]
        stage = config["first_stages"][entry.get("first_stage") or next(iter(config["first_stages"]))]
        prf = config["mir_graphs"].get(entry.get("graph_set"), {}).get("prf_queries")
        shape.add(
            (
                stage["method"],
                stage.get("targets", "titles") != "titles",
                bool((entry.get("train", {}).get("pretrain") or {}).get("queries")),
                bool(entry.get("checkpoint_of")),
                bool(prf),
                bool(prf and config["pseudo_queries"][prf].get("first_stage")),
            )
        )
    return tuple(sorted(shape))


# one configuration of each shape (the first in the matrix): dry runs of every one with MIR would take minutes
MIR_COMBINATIONS = list({mir_chain_shape(c): c for c in reversed(COMBINATIONS) if mir_models(c)}.values())


def test_long_jobs_go_first_and_mirs_whole_chain_before_them_in_every_configuration_with_mir(tmp_path):
    """The jobs' priorities (longrank.plan.priorities): MIR's chain, the default run's longest, goes first among ready jobs: every
    job a MIR model's rerank waits for, since a rule's priority does not pass to the jobs a job waits for (the graphs'
    PRF pseudo-queries, left at 0, once held them back by six minutes), and no other job; the data, which every job
    waits for, is ready first anyway. Then the other trainings and what they wait for, then the reranks and the papers'
    speed tables, and the short jobs last. Each configuration with a MIR model: its full DAG beside the DAG of its MIR
    runs."""
    assert () in MIR_COMBINATIONS and len(MIR_COMBINATIONS) > 1, MIR_COMBINATIONS
    jobs = {}
    for combo in MIR_COMBINATIONS:
        workdir, _ = prepare(combo, tmp_path)
        results = f"results/{validate_config(merged_config(combo))['dataset']['name']}"
        files = ["--configfile", *combo] if combo else []
        base = ["-s", str(REPO / "Snakefile"), "-d", workdir, "--cores", "8"]
        jobs[f"{combo_id(combo)}.all"] = (workdir, [*base, "report", *files])
        mir_runs = [f"{results}/runs/{m}.run" for m in mir_models(combo)]
        jobs[f"{combo_id(combo)}.mir"] = (workdir, [*base, *mir_runs, *files])
    done = dry_runs(jobs, tmp_path / "logs", dry_run_env(tmp_path))
    assert not [key for key, run in done.items() if run.returncode], {
        key: run.output[-2000:] for key, run in done.items() if run.returncode
    }
    levels = {
        "checks": 4,
        "mir": 3,
        "train": 2,
        "artifacts": 2,
        "candidates": 2,
        "word2vec": 2,
        "rerank": 1,
        "mir_speed": 1,
    }
    levels |= {"mores_speed": 1, "bench": 0, "evaluate": 0, "history": 0, "report": 0}
    for combo in MIR_COMBINATIONS:
        printed = printed_jobs(done[f"{combo_id(combo)}.all"].output)
        priority = {f"{rule} {wildcards}".strip(): job_priority(block) for rule, wildcards, block in printed}
        chain = {
            f"{rule} {wildcards}".strip() for rule, wildcards, _ in printed_jobs(done[f"{combo_id(combo)}.mir"].output)
        }
        assert {"annotate", "rerank"} <= {job.split()[0] for job in chain}, (combo, chain)
        # the check that can refuse the run once the data is read comes before everything (every training waits for it)
        checks = {job for job in priority if job.split()[0] == "satisfiable"}
        assert checks and {priority[job] for job in checks} == {levels["checks"]}, (combo, checks)
        first = {job for job, level in priority.items() if level == levels["mir"]}
        assert first == chain - {"data"} - checks, (combo, sorted(first ^ (chain - {"data"} - checks)))
        others = {job: level for job, level in priority.items() if job not in first | checks}
        wrong = {job: level for job, level in others.items() if levels.get(job.split()[0], level) != level}
        assert not wrong, (combo, wrong)
        assert {job.split()[0] for job in others} >= {"train", "rerank", "bench", "evaluate"}, (combo, others)
        assert max(others.values()) < levels["mir"], (combo, others)
    default_chain = {f"{r} {w}".strip() for r, w, _ in printed_jobs(done["default.mir"].output)}
    assert {"graphs graph_set=mir", "pseudo_queries pseudo_set=titles", "train model=mir, fold=0"} <= default_chain


def job_priority(block: str) -> int:
    """A dry run's printed priority of a job (Snakemake prints none at 0)."""
    found = re.search(r"^\s+priority: (-?\d+)$", block, re.M)
    return int(found.group(1)) if found else 0
