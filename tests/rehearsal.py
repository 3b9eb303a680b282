"""The TREC DL rehearsal's command lines and its whitelist of size keys (config/studies/trec-dl-rehearsal.yaml), shared
by the tests that dry-run it (test_config_matrix.py, test_slurm_profile.py) and the one that runs it
(test_trec_dl_rehearsal.py). An overlay key is a size key when its dotted path matches a pattern here (``*``: one
key of any name, a model's or a graph set's); a value may only be smaller than the full-scale one (a number, or a
list's largest number), or one of the CPU stand-ins for weights that a hub or a manual download gives."""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import re
from pathlib import Path

from conftest import REPO
from longrank.validation.validate import validate_config
from longrank.config.model_entries import effective_settings
from longrank.resolved_config import resolved_models
from longrank.config.files import merged

REHEARSAL = "config/studies/trec-dl-rehearsal.yaml"
PASSAGE_REHEARSAL = "config/studies/trec-dl-rehearsal-passage.yaml"
YEARS = ("2019", "2020")  # the TREC DL years over the documents
DEV = "dev"  # MS MARCO document Dev as a test set (config/trec-dl-dev.yaml), a year's sibling over config/trec-dl.yaml
PASSAGE = "passage"  # MORES's passage run (config/trec-dl-passage.yaml)
RUNS = (*YEARS, PASSAGE)


def full_scale(run: str) -> tuple[str, ...]:
    """A full-scale run's config files: a TREC DL year's (or the Dev run's) over the documents, or the passage run's."""
    return ("config/trec-dl-passage.yaml",) if run == PASSAGE else ("config/trec-dl.yaml", f"config/trec-dl-{run}.yaml")


def rehearsal(run: str) -> tuple[str, ...]:
    return (*full_scale(run), PASSAGE_REHEARSAL if run == PASSAGE else REHEARSAL)


MODEL_SIZES = (
    "rerank_depth",
    "max_doc_len",
    "max_doc_tokens",
    "passage_len",
    "passage_stride",
    "max_passages",
    "hidden_dim",
    "n_heads",
    "conv_groups",
    "min_doc_freq",
    "max_vocabulary",
)
# accumulation: how many micro-batches a shrunk batch is taken in (it must divide the batch)
TRAIN_SIZES = ("steps", "batch_size", "negatives", "warmup_steps", "eval_every", "patience", "accumulation")
SIZE_KEYS = (
    "rerank.batch_size",
    *(f"bench.{k}" for k in ("lengths", "batch_size", "repeats")),
    *(f"mores_speed.{k}" for k in ("candidates", "batch_size", "lengths", "repeats")),
    *(f"mir_speed.{k}" for k in ("lengths", "batch_size", "repeats", "documents")),
    *(f"attention_scaling.{k}" for k in ("lengths", "batch_size", "hidden", "heads", "repeats")),
    *(f"word2vec.{k}" for k in ("dim", "epochs", "min_count")),
    *(f"annotations.{k}" for k in ("max_words", "batch_size", "n_process", "shards")),
    "impact_index.shards",
    *(f"mir_graphs.*.{k}" for k in ("max_doc_tokens", "shards")),
    *(f"models.*.{k}" for k in MODEL_SIZES),
    *(f"models.*.train.{k}" for k in TRAIN_SIZES),
    *(f"first_stages.*.{k}" for k in ("steps", "batch_size", "passage_words", "max_passages", "shards")),
)
# Weights a hub or a manual download gives, and their CPU stand-ins (the packages' GloVe 50d, MiniLM or BERT-base's
# shape with random weights); a key's full-scale value must be such a download (a file, a hub name) for it to change.
STAND_INS = {
    "models.*.embeddings": {"glove-6b-50d"},
    "models.*.encoder": {"minilm", "random-bert-base"},
    "mir_graphs.*.encoder": {"minilm", "random-bert-base"},
    "first_stages.*.encoder": {"minilm", "random-bert-base"},
}


def flat(tree: dict, where: str = "") -> dict[str, object]:
    """Dotted key -> value of every leaf of a nested mapping; the first stages' list by name (``first_stages.hdct.steps``):
    an overlay restates the list whole to shrink one entry of it."""
    out = {}
    for key, value in tree.items():
        path = f"{where}{key}"
        if path == "first_stages" and isinstance(value, list):
            value = {stage["name"]: stage for stage in value}
        if isinstance(value, dict) and value:
            out.update(flat(value, f"{path}."))
        else:
            out[path] = value
    return out


def pattern_of(key: str) -> str | None:
    """The whitelist pattern ``key`` matches, size key or stand-in, or None."""
    return next(
        (p for p in (*SIZE_KEYS, *STAND_INS) if fnmatch.fnmatchcase(key, p) and p.count(".") == key.count(".")), None
    )


def generator():
    """tests/collections/msmarco-mini/make.py as a module (its folder name has a dash)."""
    path = REPO / "tests" / "collections" / "msmarco-mini" / "make.py"
    spec = importlib.util.spec_from_file_location("msmarco_mini", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_msmarco(home: Path, **sizes) -> dict[str, int]:
    return generator().make(home, **sizes)


def make_msmarco_passages(home: Path) -> dict[str, int]:
    return generator().make_passages(home)


def resolved(combo: tuple[str, ...]) -> dict:
    """The config as the run's config.json holds it (rule resolved_config: the validated config and its models as
    their jobs read them), through JSON as the rule writes it."""
    config = validate_config(merged(combo))
    config["resolved_models"] = resolved_models(config["models"], effective_settings(config))
    return json.loads(json.dumps(config))


def outside_whitelist(config: dict) -> dict[str, object]:
    """The resolved config's leaves but the whitelisted ones, also where resolved_models repeats a model's keys, and
    but the sizes the config stage derives from whitelisted ones (a model's document budget and the words it reads:
    its lengths; its effective depth: rerank_depth)."""
    out = {}
    for key, value in flat(config).items():
        derived = r"capabilities\.document_budget|effective\.(?:rerank_depth|words_read)"
        if re.fullmatch(rf"resolved_models\.[^.]+\.(?:{derived})", key):
            continue
        as_entry = re.sub(r"^resolved_models\.([^.]+)\.(?:architecture\.)?", r"models.\1.", key)
        if pattern_of(key) is None and pattern_of(as_entry) is None:
            out[key] = value
    return out


def published_figures_beside_measured(results: Path, full: dict) -> set[str]:
    """Check that the report's published-figures section sets each figure the full-scale config claims beside a
    measured mean and its 95% CI; return the systems the figures are of."""
    from longrank.report.reproduction import on_collection, published

    report = (results / "report" / "report.md").read_text()
    section = report.split("Published figures beside the reproduced ones", 1)[1].split("\n## ", 1)[0]
    figures = [f for f in on_collection(published(), full["dataset"]) if f.system in full["models"]]
    assert figures, "the full-scale config claims no published figure"
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in section.splitlines() if line.startswith("|")]
    for fig in figures:
        row = next((r for r in rows if r[0] == fig.system and fig.printed in r), None)
        assert row is not None, f"{fig.system} {fig.measure} {fig.printed}: no row"
        assert re.fullmatch(r"\d\.\d+ \[\d\.\d+, \d\.\d+\]", row[5]), f"{fig.system} {fig.measure}: measured {row[5]!r}"
    return {f.system for f in figures}


def shell_commands(output: str) -> list[tuple[str, str]]:
    """A dry run's jobs (``-p``) as ``(rule, shell command)``, in the order printed."""
    jobs, rule = [], None
    for line in output.splitlines():
        if match := re.fullmatch(r"(?:local)?rule (\w+):", line):
            rule = match[1]
        elif line.startswith("Shell command: ") and rule is not None:
            jobs.append((rule, line.removeprefix("Shell command: ")))
    return jobs


def sharded_and_one_shard_commands(tmp_path: Path, one_shard: Path) -> tuple[list, list]:
    """The TREC DL 2019 rehearsal's jobs as ``shell_commands`` gives them, dry-run as it is (its stages in shards) and
    with the overlay ``one_shard`` setting a stage's shards to 1: what a shard count changes in the plan."""
    import os
    import sys

    from conftest import dry_runs

    configs = ["config/trec-dl.yaml", "config/trec-dl-2019.yaml", "config/studies/trec-dl-rehearsal.yaml"]
    jobs = {}
    for name, extra in (("three", []), ("one", [str(one_shard)])):
        workdir = tmp_path / name
        workdir.mkdir()
        (workdir / "config").symlink_to(REPO / "config")
        argv = ["-s", str(REPO / "Snakefile"), "-d", str(workdir), "--cores", "1", "-p", "--configfile"]
        jobs[name] = (workdir, [*argv, *configs, *extra, "--", "report"])
    (tmp_path / "ir_datasets").mkdir()  # a dry run reads no data
    env = {**os.environ, "IR_DATASETS_HOME": str(tmp_path / "ir_datasets")}
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    done = dry_runs(jobs, tmp_path / "logs", env)
    assert all(run.returncode == 0 for run in done.values()), {k: v.output[-3000:] for k, v in done.items()}
    return shell_commands(done["three"].output), shell_commands(done["one"].output)
