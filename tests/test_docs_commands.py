"""Every command and config snippet a newcomer copies from the README and docs/ (``docs_snippets.PAGES``) is run,
dry-run or checked, read from the Markdown, so a page cannot drift from what works: Snakemake commands are dry-run
here as written; ``longrank export`` / ``rerank`` run in tests/test_examples.py (the README's) and
tests/test_export.py (docs/api.md's); config snippets are validated, and a whole config dry-run; the install and
test commands name extras, markers and plugins that exist. A command of a kind none of these covers fails here."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

from conftest import REPO, dry_runs
from docs_snippets import PAGES, blocks, commands, documented
from longrank.config.files import DEFAULT_CONFIG, merged
from longrank.validation.validate import validate_config

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def covered_by(words: list[str]) -> str | None:
    """Which test runs or checks a documented command; None for a kind none does."""
    program, first = words[0], (words[1] if len(words) > 1 else "")
    if program == "snakemake":
        return "test_every_documented_snakemake_command_plans"
    if program == "longrank" and first in ("export", "rerank"):
        return "tests/test_examples.py (README), tests/test_export.py (docs/api.md)"
    if (program, first) in {("python3", "-m"), (".", ".venv/bin/activate"), ("pip", "install"), ("pytest", "-q")}:
        return "test_the_install_and_test_commands_name_what_exists"
    if program == "tail":
        return "test_a_documented_log_is_a_rules_log"
    return None


def test_every_documented_command_is_run_or_checked():
    found = [(where, words) for page in PAGES for where, words in commands(page)]
    assert len(found) >= 10, found  # the pages' code blocks were found at all
    unchecked = [f"{where}: {' '.join(words)}" for where, words in found if covered_by(words) is None]
    assert not unchecked, (
        "documented commands no test runs or checks (add them to covered_by and a test):\n" + "\n".join(unchecked)
    )


def test_the_install_and_test_commands_name_what_exists():
    for where, words in documented("pip", "install"):
        extras = re.fullmatch(r"-e\s*\.\[([\w,]+)\]", " ".join(words[2:]).replace("'", ""))
        assert extras, f"{where}: the install is not an editable install of this checkout with extras: {words}"
        missing = set(extras.group(1).split(",")) - set(PYPROJECT["project"]["optional-dependencies"])
        assert not missing, f"{where}: extras {missing} are not in pyproject.toml"
    markers = {m.split(":")[0] for m in PYPROJECT["tool"]["pytest"]["ini_options"]["markers"]}
    test_extra = " ".join(PYPROJECT["project"]["optional-dependencies"]["test"])
    for where, words in documented("pytest"):
        if "-m" in words:
            named = set(re.findall(r"\w+", words[words.index("-m") + 1])) - {"not", "and", "or"}
            assert named <= markers, f"{where}: markers {named - markers} are not pyproject.toml's"
        if "-n" in words:
            assert "pytest-xdist" in test_extra, f"{where}: -n needs pytest-xdist in the test extra"


def test_a_documented_log_is_a_rules_log():
    rules = "".join(p.read_text() for p in (REPO / "workflow" / "rules").glob("*.smk"))
    patterns = [
        re.escape(log).replace(re.escape("{{"), "{").replace(re.escape("}}"), "}")
        for log in re.findall(r'f"\{R\}/logs/([^"]+)"', rules)
    ]
    regexes = [re.sub(r"\\\{\w+\\\}|\{\w+\}", r"[\\w.+@-]+", p) for p in patterns]
    for where, words in documented("tail"):
        path = words[-1]
        assert re.fullmatch(r"results/[\w-]+/logs/.+", path), f"{where}: {path} is not under results/<dataset>/logs/"
        name = path.split("/logs/", 1)[1]
        assert any(re.fullmatch(r, name) for r in regexes), f"{where}: no rule writes a log named like {name}"


def test_the_readmes_change_of_a_setting_is_a_key_of_the_example():
    """The README's "change `steps: 20` to `steps: 40` in ... `examples/mine.yaml` (`models.knrm.train.steps`)": the
    example has that value at that key, and the changed config is valid."""
    readme = (REPO / "README.md").read_text()
    change = re.search(r"change `(\w+): (\d+)` to `\1: (\d+)`.*?`(examples/[\w.]+\.yaml)` \(`([\w.]+)`\)", readme, re.S)
    assert change, "the README's change-a-setting sentence is not found"
    key, old, new, example, dotted = change.groups()
    config = merged([example])
    *parents, last = dotted.split(".")
    assert last == key
    block = config
    for part in parents:
        block = block[part]
    assert block[key] == int(old), f"{example}: {dotted} is {block[key]}, the README says {old}"
    block[key] = int(new)
    validate_config(config)


def snippet_configs() -> list[tuple[str, dict]]:
    """The config snippets (```yaml blocks) of the pages, with where they are; the SLURM page's is a profile."""
    return [
        (b.where, yaml.safe_load(b.text)) for page in PAGES if page != "docs/slurm.md" for b in blocks(page, "yaml")
    ]


@pytest.mark.parametrize("where, snippet", snippet_configs(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_config_snippet_is_valid_over_the_default(where, snippet):
    from snakemake.utils import update_config

    config = merged([])
    update_config(config, snippet)  # as --configfile merges it: mappings key by key, the rest replaced whole
    validate_config(config)


def test_the_slurm_pages_profile_names_the_workflows_rules():
    rules = set(re.findall(r"^(?:rule|use rule \w+ as) (\w+)", "".join(
        p.read_text() for p in (REPO / "workflow" / "rules").glob("*.smk")), re.M))  # fmt: skip
    [profile] = [yaml.safe_load(b.text) for b in blocks("docs/slurm.md", "yaml")]
    assert profile["executor"] and set(profile.get("set-resources", {})) <= rules


@pytest.mark.stage
def test_every_documented_snakemake_command_plans(tmp_path):
    """Each documented `snakemake ...` command, as written, from a directory laid out as the repository root, dry-run;
    and each whole config snippet (one with a dataset) as a config file of its own."""
    workdir = tmp_path / "checkout"
    workdir.mkdir()
    for name in ("config", "examples", "profiles"):
        (workdir / name).symlink_to(REPO / name)
    argvs = {" ".join(words[1:]): words[1:] for _, words in documented("snakemake")}
    for i, (where, snippet) in enumerate(snippet_configs()):
        if "dataset" in snippet:
            path = workdir / f"snippet{i}.yaml"
            path.write_text(yaml.safe_dump(snippet))
            argvs[f"{where} as a config"] = ["--cores", "2", "report", "--configfile", path.name]
    assert any("--profile" in a for a in argvs.values()) and any(DEFAULT_CONFIG not in a for a in argvs)
    names = dict(enumerate(argvs))  # dry_runs keeps each output as <key>.log: a number, not the command
    plans = {
        names[int(i)]: plan
        for i, plan in dry_runs(
            {str(i): (workdir, ["-s", str(REPO / "Snakefile"), *argvs[key]]) for i, key in names.items()}, tmp_path
        ).items()
    }
    failed = {key: plan.output[-2000:] for key, plan in plans.items() if plan.returncode or "Exception" in plan.output}
    assert not failed, failed
    for key, plan in plans.items():
        assert re.search(r"^total\s+\d+$", plan.output, re.M), f"{key}: no job table\n{plan.output[-2000:]}"


def test_the_pages_exist():
    assert all(Path(REPO / page).is_file() for page in PAGES)
