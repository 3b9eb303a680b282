"""Every config in config/ and every documented combination of them builds its DAG: `snakemake -n` over the
default config, without the data (an empty IR_DATASETS_HOME; local collections as empty placeholder files),
so that a config nobody has run yet still parses, validates and resolves every rule's inputs."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from longrank.config import resolve_likes, validate_config
from longrank.entries import document_budget
from longrank.io import InputError

CONFIG = REPO / "config"
NOT_VARIANTS = {"config.yaml", "schema.yaml"}  # the default every run merges over, and the schema

# The combinations the README and the configs' header comments document (`--configfile` lines), each merged
# over config/config.yaml in this order. () is the default config alone. A new config must be added here
# (test_every_config_is_dry_run) and so must a newly documented combination (test_documented_combinations_are_listed).
COMBINATIONS: list[tuple[str, ...]] = [
    (),
    ("irled.yaml",),
    ("tkl.yaml",),
    ("audit.yaml",),
    ("encoder-recipes.yaml",),
    ("mores.yaml",),
    ("ndrm.yaml",),
    ("trec-dl-2019.yaml",),
    ("trec-dl-2020.yaml",),
    ("tkl.yaml", "mores.yaml"),
    ("irled.yaml", "tkl.yaml"),
    ("irled.yaml", "mores.yaml"),
    ("irled.yaml", "encoder-recipes.yaml"),
    ("irled.yaml", "tkl.yaml", "mores.yaml"),
    ("irled.yaml", "irled-ndrm.yaml"),
    ("pretrain.yaml",),
    ("irled.yaml", "pretrain.yaml", "irled-pretrain.yaml"),
    ("hdct.yaml",),
    ("pretrain.yaml", "hdct.yaml"),
    ("irled.yaml", "hdct.yaml", "irled-hdct.yaml"),
    ("irled.yaml", "pretrain.yaml", "irled-pretrain.yaml", "hdct.yaml", "irled-hdct.yaml"),
    ("mir.yaml",),
    ("irled.yaml", "mir.yaml"),
    ("irled.yaml", "irled-mir.yaml"),
    ("irled.yaml", "irled-mir.yaml", "mir.yaml"),
    ("irled.yaml", "irled-mir-cpu.yaml"),
    ("irled.yaml", "mir.yaml", "irled-mir-cpu.yaml"),
]


def combo_id(combo: tuple[str, ...]) -> str:
    return "+".join(Path(c).stem for c in combo) or "default"


def merged_config(combo: tuple[str, ...]) -> dict:
    """The config Snakemake sees: each --configfile merged recursively over config/config.yaml."""

    def update(base: dict, new: dict) -> None:
        for key, value in new.items():
            if isinstance(value, dict) and isinstance(base.get(key), dict):
                update(base[key], value)
            else:
                base[key] = value

    config: dict = {}
    for name in ("config.yaml", *combo):
        update(config, yaml.safe_load((CONFIG / name).read_text()) or {})
    return config


def placeholder_collection(workdir: Path, combo: tuple[str, ...]) -> None:
    """A local collection's files are inputs of the data rule: empty files stand in for them (a dry run
    never reads them). Paths are relative to the working directory, as a user's run resolves them."""
    dataset = validate_config(merged_config(combo), str(CONFIG / "schema.yaml"))["dataset"]
    if dataset.get("source") == "local":
        for key in ("docs", "queries", "qrels"):
            path = Path(dataset[key])
            if not path.is_absolute():
                (workdir / path).parent.mkdir(parents=True, exist_ok=True)
                (workdir / path).touch()


# One Python process imports Snakemake and every model module (the workflow asks the registry for each model's
# artifacts at parse time: torch, transformers, ~5 s of CPU) once, then forks one child per dry run, two at a
# time: a process per dry run would pay those imports twelve times.
RUNNER = r"""
import json, os, sys

import snakemake.cli

try:
    from longrank.models.registry import MODEL_TYPES, model_class

    for model_type in MODEL_TYPES:
        model_class(model_type)
except Exception:  # a broken import shows in the dry runs' own output
    pass

pending, running, codes = json.loads(sys.argv[1]), {}, {}
while pending or running:
    while pending and len(running) < 2:
        workdir, argv = pending.pop(0)
        pid = os.fork()
        if pid == 0:
            os.chdir(workdir)
            log = os.open("dry_run.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(log, 1)
            os.dup2(log, 2)
            try:
                snakemake.cli.main(argv)
                code = 0
            except SystemExit as done:
                code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
            except BaseException:
                import traceback

                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        running[pid] = workdir
    pid, status = os.wait()
    codes[running.pop(pid)] = os.waitstatus_to_exitcode(status)
print(json.dumps(codes))
"""


class DryRun:
    def __init__(self, returncode: int, output: str):
        self.returncode, self.output = returncode, output

    def __repr__(self) -> str:  # keeps pytest's tracebacks to the message
        return f"DryRun(returncode={self.returncode})"


def prepare(combo: tuple[str, ...], root: Path) -> tuple[str, list[str]]:
    """The combination's working directory and Snakemake arguments."""
    workdir = root / combo_id(combo)
    workdir.mkdir()
    (workdir / "config").symlink_to(CONFIG)  # `configfile: "config/config.yaml"` resolves against the working directory
    placeholder_collection(workdir, combo)
    argv = ["-s", str(REPO / "Snakefile"), "-d", str(workdir), "--cores", "1", "-n", "--quiet", "rules"]
    if combo:
        argv += ["--configfile", *(f"config/{c}" for c in combo)]
    return str(workdir), argv


@pytest.fixture(scope="module")
def dry_runs() -> dict[tuple[str, ...], DryRun]:
    with tempfile.TemporaryDirectory(prefix="config_matrix_") as root:
        jobs = {combo: prepare(combo, Path(root)) for combo in COMBINATIONS}
        empty_home = Path(root) / "ir_datasets"
        empty_home.mkdir()  # a dry run must not need any data
        env = {
            **os.environ,
            "IR_DATASETS_HOME": str(empty_home),
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        }
        done = subprocess.run(
            [sys.executable, "-c", RUNNER, json.dumps(list(jobs.values()))],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, f"the dry-run runner failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        codes = json.loads(done.stdout.strip().splitlines()[-1])
        yield {
            combo: DryRun(codes[workdir], (Path(workdir) / "dry_run.log").read_text())
            for combo, (workdir, _) in jobs.items()
        }


@pytest.mark.parametrize("combo", COMBINATIONS, ids=combo_id)
def test_dry_run_builds_the_dag(dry_runs, combo):
    done = dry_runs[combo]
    output = done.output
    args = " ".join(f"config/{c}" for c in combo) or "(default)"
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


def test_every_config_is_dry_run():
    listed = {name for combo in COMBINATIONS for name in combo}
    variants = {p.name for p in CONFIG.glob("*.yaml")} - NOT_VARIANTS
    assert not variants - listed, f"configs in no combination of COMBINATIONS (add them): {sorted(variants - listed)}"
    assert not listed - variants, f"COMBINATIONS names configs that do not exist: {sorted(listed - variants)}"


def documented_combinations() -> dict[tuple[str, ...], str]:
    """Every `--configfile config/a.yaml config/b.yaml ...` in the README, docs/ (the studies' commands) and the
    configs' comments."""
    found = {}
    for path in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")), *sorted(CONFIG.glob("*.yaml"))]:
        for match in re.finditer(r"--configfile((?:\s+config/[\w.-]+\.yaml)+)", path.read_text()):
            combo = tuple(Path(name).name for name in match.group(1).split())
            if set(combo) - NOT_VARIANTS:
                found.setdefault(combo, str(path.relative_to(REPO)))
    return found


def test_documented_combinations_are_listed():
    documented = documented_combinations()
    assert documented, "no `--configfile` line found in README.md, docs/**/*.md or config/*.yaml"
    missing = {combo: where for combo, where in documented.items() if combo not in COMBINATIONS}
    assert not missing, f"documented combinations not in COMBINATIONS (add them): {missing}"


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


@pytest.mark.parametrize("combo", [c for c in COMBINATIONS if "mir.yaml" in c], ids=combo_id)
def test_mir_ablations_differ_from_mir_only_in_the_keys_they_name(combo):
    """Over any collection's config, each ablation row changes only what config/mir.yaml says it changes (not the
    document length of another collection), and BERT-MaxP reads as many tokens as MIR."""
    models = validate_config(merged_config(combo), str(CONFIG / "schema.yaml"))["models"]
    ref = models["mir"]
    for name, own in yaml.safe_load((CONFIG / "mir.yaml").read_text())["models"].items():
        if own.get("like") == "mir":
            entry = models[name]
            assert entry["like"] == "mir"
            assert {k for k in set(entry) | set(ref) if entry.get(k) != ref.get(k)} == set(own), name
    assert models["bert_maxp128"]["enabled"] and document_budget(models["bert_maxp128"]) == ref["max_doc_tokens"]


@pytest.mark.parametrize("combo", [("trec-dl-2019.yaml",), ("trec-dl-2020.yaml",)], ids=combo_id)
def test_full_scale_entries_rerank_the_configs_depth_not_the_defaults_cpu_sized_one(combo):
    config = merged_config(combo)
    depth = config["rerank_depth"]
    leaked = {
        name: entry["rerank_depth"]
        for name, entry in config["models"].items()
        if entry.get("rerank_depth", depth) != depth
    }
    assert not leaked, f"entries that kept config/config.yaml's rerank_depth over {combo}: {leaked}"


@pytest.mark.parametrize("combo", [c for c in COMBINATIONS if "pretrain.yaml" in c], ids=combo_id)
def test_each_pretrained_row_is_its_default_entry_with_a_pretraining_block(combo):
    models = validate_config(merged_config(combo), str(CONFIG / "schema.yaml"))["models"]
    for name in yaml.safe_load((CONFIG / "pretrain.yaml").read_text())["models"]:
        entry, default = models[name], models[name.removesuffix("_pretrained")]
        assert entry["train"].pop("pretrain") and entry.pop("like") == name.removesuffix("_pretrained")
        assert entry == default, name
