"""Every value a rule puts in its shell command reaches the stage as the one argument it was.

Two checks: every `{...}` placeholder of every rule's `shell:` is shell-quoted (`:q`), read from the .smk files
themselves; and a dry run (`snakemake -n --printshellcmds`) of a config whose free-form values hold a space, a
quote and a `;` prints commands whose argv, split as a shell splits it, holds each value intact."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import string
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO


RULES = sorted((REPO / "workflow" / "rules").glob("*.smk"))
# {threads} is an int Snakemake fills in itself; everything else (params, input, output, log, wildcards) is quoted,
# wildcards too although common.smk constrains them to [A-Za-z0-9_+-]: quoting costs nothing and survives a
# loosened constraint.
UNQUOTED_ALLOWED = {"threads"}
HOSTILE = "a b'c;touch PWNED"


def shell_commands(path: Path) -> list[tuple[int, str]]:
    """(line, command) of each `shell:` in a .smk file: the string literals indented under it, concatenated."""
    lines = path.read_text().splitlines()
    found = []
    for i, line in enumerate(lines):
        match = re.match(r"^(\s*)shell:\s*(.*)$", line)
        if not match:
            continue
        indent, body = len(match.group(1)), [match.group(2)] if match.group(2) else []
        j = i + 1
        while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > indent):
            body.append(lines[j])
            j += 1
        found.append((i + 1, ast.literal_eval("(" + "\n".join(body) + ")")))
    return found


def unquoted_placeholders(command: str) -> list[str]:
    return [
        field
        for _, field, spec, _ in string.Formatter().parse(command)
        if field is not None and field not in UNQUOTED_ALLOWED and not (spec or "").endswith("q")
    ]


def test_the_parser_sees_every_rule_and_flags_an_unquoted_placeholder():
    commands = [cmd for path in RULES for _, cmd in shell_commands(path)]
    assert len(commands) >= sum(path.read_text().count("shell:") for path in RULES) > 15
    assert unquoted_placeholders("x --encoder {params.encoder} {threads} {log:q} {{literal}}") == ["params.encoder"]


@pytest.mark.parametrize("path", RULES, ids=lambda p: p.name)
def test_every_shell_placeholder_is_quoted(path):
    bad = [
        f"{path.name}:{line}: {{{field}}}" for line, cmd in shell_commands(path) for field in unquoted_placeholders(cmd)
    ]
    assert not bad, "placeholders reach the shell unquoted (add :q):\n" + "\n".join(bad)


# ---- a dry run with hostile values ------------------------------------------------------------------------------
def argv_after(argv: list[str], flag: str) -> str:
    assert flag in argv, f"{flag} not in {argv}"
    return argv[argv.index(flag) + 1]


@pytest.fixture(scope="module")
def printed_commands(tmp_path_factory) -> list[list[str]]:
    """argv of every `python -m longrank` command a dry run of the whole workflow prints, with a local collection
    and a run file under a directory named HOSTILE and a MORES encoder named HOSTILE."""
    root = tmp_path_factory.mktemp("quoting")
    hostile_dir = root / HOSTILE
    hostile_dir.mkdir()
    for name in ("docs.jsonl", "queries.tsv", "qrels.txt", "first.run"):
        (hostile_dir / name).touch()  # a dry run never reads them; the data and candidates rules need them present
    config = {
        "dataset": {
            "name": "tiny",
            "source": "local",
            "docs": str(hostile_dir / "docs.jsonl"),
            "queries": str(hostile_dir / "queries.tsv"),
            "qrels": str(hostile_dir / "qrels.txt"),
        },
        "first_stages": [
            {"name": "bm25", "method": "bm25", "top_k": 100},
            {"name": "theirs", "method": "run_file", "path": str(hostile_dir / "first.run")},
        ],
        "models": {"mores": {"encoder": HOSTILE}},
    }
    (root / "hostile.yaml").write_text(yaml.safe_dump(config))
    (root / "config").symlink_to(REPO / "config")
    (root / "ir_datasets").mkdir()
    env = {
        **os.environ,
        "IR_DATASETS_HOME": str(root / "ir_datasets"),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", "all", "results/tiny/bench/mores.speed.json", "-s", str(REPO / "Snakefile"),
         "-d", str(root), "--cores", "1", "-n", "--printshellcmds", "--configfile", str(root / "hostile.yaml")],
        cwd=root, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = [line.strip() for line in (done.stdout + done.stderr).splitlines() if "python -m longrank " in line]
    assert lines, done.stdout[-3000:]
    assert not list(root.rglob("PWNED*"))
    return [shlex.split(line) for line in lines]


def stage(commands: list[list[str]], name: str) -> list[list[str]]:
    found = [argv for argv in commands if argv[argv.index("longrank") + 1] == name]
    assert found, f"the dry run printed no {name} command"
    return found


@pytest.mark.stage  # Snakemake prints every rule's command
def test_a_hostile_encoder_name_is_one_argument(printed_commands):
    (speed,) = stage(printed_commands, "mores_speed")
    assert argv_after(speed, "--encoder") == HOSTILE
    for argv in stage(printed_commands, "train"):
        if argv_after(argv, "--model") == "mores":
            assert json.loads(argv_after(argv, "--model-config"))["encoder"] == HOSTILE


@pytest.mark.stage  # Snakemake prints every rule's command
def test_hostile_paths_are_one_argument(printed_commands):
    (data,) = stage(printed_commands, "data")
    assert json.loads(argv_after(data, "--dataset"))["docs"].endswith(f"{HOSTILE}/docs.jsonl")
    specs = [json.loads(argv_after(argv, "--first-stage")) for argv in stage(printed_commands, "candidates")]
    assert any(spec.get("path", "").endswith(f"{HOSTILE}/first.run") for spec in specs)


@pytest.mark.stage  # Snakemake prints every rule's command
def test_no_command_holds_a_fragment_of_a_hostile_value(printed_commands):
    """A value split by the shell would leave its pieces as words of their own (`touch`, `PWNED`)."""
    for argv in printed_commands:
        assert "touch" not in argv and "PWNED" not in argv, argv
