"""What the workflow, the config checks, the benches and the report ask of a model type is its row of the torch-free
table ``longrank.config.model_types`` (``reads_graph_set``, ``speed_bench``, ``cross_encoder``, ``parameter_groups``,
``document_budget``, ``artifacts``, the architecture defaults), which the registry checks each class against; and
nothing outside that table and the registry compares a ``type:`` name: a new model type is its own file and a row
in ``MODEL_TYPES`` (and the schema's enum of types, which tests/test_single_source.py keeps equal to it)."""

from __future__ import annotations

import json
import re

import pytest

from conftest import REPO
from longrank.config import model_types
from longrank.errors import InputError
from longrank.config.model_types import MODEL_TYPES, SPEED_BENCHES, Capabilities, capabilities
from longrank.models import registry
from longrank.models.base import Ranker
from longrank.models.registry import model_class
from longrank.resolved_config import resolved_models

TABLES = {REPO / "src/longrank/models/registry.py", REPO / "src/longrank/config/model_types.py"}
# an entry's type read and compared (entry["type"] == "mir", entry.get("type") in {...}, "mir" != entry["type"]), or
# a registered type's name compared as a string
_TYPE_KEY = r"""(\[\s*["']type["']\s*\]|\.get\(\s*["']type["']\s*(,[^)]*)?\))"""
_TYPE_NAME = "|".join(map(re.escape, MODEL_TYPES))
TYPE_COMPARISONS = [
    re.compile(_TYPE_KEY + r"\s*(==|!=|\bnot\s+in\b|\bin\b)"),
    re.compile(r"(==|!=)\s*\S*" + _TYPE_KEY),
    re.compile(rf"""(==|!=)\s*["']({_TYPE_NAME})["']|["']({_TYPE_NAME})["']\s*(==|!=)"""),
]


def sources():
    files = [*sorted((REPO / "src").rglob("*.py")), *sorted((REPO / "workflow").rglob("*.smk")), REPO / "Snakefile"]
    return [f for f in files if f not in TABLES]


def test_no_model_type_is_compared_outside_the_registry():
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in sources()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if any(pattern.search(line) for pattern in TYPE_COMPARISONS)
    ]
    assert not found, "ask longrank.config.model_types.capabilities instead:\n" + "\n".join(found)


def test_the_scan_finds_what_it_forbids():
    for line in [
        'any(config["models"][m]["type"] == "ndrm" for m in MODELS)',
        'if entry.get("type") in ENCODER_BASELINES and m in frames',
        'if "mir" != entry["type"]:',
        'if kind == "bert_ranker":',
    ]:
        assert any(p.search(line) for p in TYPE_COMPARISONS), line
    assert not any(p.search('cuda = device.type == "cuda"') for p in TYPE_COMPARISONS)


@pytest.mark.parametrize("model_type", sorted(MODEL_TYPES))
def test_every_registered_class_agrees_with_its_row(model_type):
    """The row's architecture defaults are the class's signatures', its parameter groups the ones the class maps, its
    encoder flag the constructor's: the registry would refuse the class otherwise."""
    cls = model_class(model_type)
    assert issubclass(cls, Ranker)
    assert registry.row_problems(model_type, cls) == []
    declared = capabilities({"type": model_type})
    assert isinstance(declared.reads_graph_set, bool) and isinstance(declared.cross_encoder, bool)
    assert declared.speed_bench in (*SPEED_BENCHES, None)
    assert set(declared.parameter_groups) <= {"embeddings", "scoring"}  # the groups train.*_lr keys name
    assert declared.document_budget is None  # an entry that leaves its length keys out says nothing
    # what the config stage writes into config.json for the report reads back as the same capabilities
    written = json.loads(json.dumps(declared.to_json()))
    assert Capabilities(**{**written, "parameter_groups": tuple(written["parameter_groups"])}) == declared


def test_the_papers_models_declare_the_benches_and_graphs_they_need():
    by_bench = {b: sorted(t for t in MODEL_TYPES if capabilities({"type": t}).speed_bench == b) for b in SPEED_BENCHES}
    assert by_bench == {"mores_speed": ["mores"], "mir_speed": ["bert_ranker", "mir"], "attention_scaling": ["ndrm"]}
    assert [t for t in MODEL_TYPES if capabilities({"type": t}).reads_graph_set] == ["mir"]
    assert sorted(t for t in MODEL_TYPES if capabilities({"type": t}).cross_encoder) == ["bert_ranker", "mores"]
    assert capabilities({"type": "tkl"}).parameter_groups == ("embeddings", "scoring")


@pytest.mark.parametrize(
    "entry, budget",
    [
        ({"type": "knrm", "max_doc_len": 200}, 200),
        ({"type": "mir", "max_doc_tokens": 1024, "graph_set": "g"}, 1024),
        ({"type": "mir", "max_doc_len": 7}, None),  # MIR reads max_doc_tokens (None: its graph set's)
        ({"type": "bert_ranker", "passage_len": 256}, 256),  # FirstP
        ({"type": "bert_ranker", "mode": "maxp", "passage_len": 128, "passage_stride": 64}, 64 * 15 + 128),
        ({"type": "bert_ranker", "mode": "maxp", "passage_len": 128, "max_passages": 4}, 128 * 4),
        ({"type": "bert_ranker", "mode": "maxp"}, None),
    ],
)
def test_the_document_budget_is_what_the_entry_reads(entry, budget):
    assert capabilities(entry).document_budget == budget


def test_the_config_stage_writes_each_entrys_capabilities_for_the_report():
    models = {"mir": {"type": "mir", "graph_set": "g", "max_doc_tokens": 512}, "knrm": {"type": "knrm"}}
    written = json.loads(json.dumps(resolved_models(models)))
    assert written["mir"]["capabilities"] == {
        "reads_graph_set": True,
        "speed_bench": "mir_speed",
        "cross_encoder": False,
        "parameter_groups": ["scoring"],
        "document_budget": 512,
    }
    assert written["knrm"]["capabilities"]["speed_bench"] is None


def test_an_export_notes_the_fold_artifacts_it_leaves_out():
    assert model_class("mores").export_notes({"reuse": "s1"})[0].startswith("reuse: s1: the Reuse store")
    assert model_class("mores").export_notes({}) == []  # no reuse: no store
    assert "impact index" in model_class("ndrm").export_notes({})[0]
    assert model_class("knrm").export_notes({}) == []


def test_a_row_behind_its_class_stops_the_class_from_loading(monkeypatch):
    """A default changed in a model's signature and not regenerated into longrank/config/model_defaults.py: the parse would
    check and resolve entries against the old one, so the registry refuses the class and names the command."""
    stale = {**model_types.ARCHITECTURE_DEFAULTS["knrm"], "max_doc_len": 201}
    monkeypatch.setitem(model_types.ARCHITECTURE_DEFAULTS, "knrm", stale)
    monkeypatch.setattr(registry, "_CHECKED", set())
    with pytest.raises(InputError, match="python -m longrank.docgen"):
        model_class("knrm")
    wrong_groups = model_types.ModelType(parameter_groups=("scoring",))
    monkeypatch.setitem(model_types.MODEL_TYPES, "knrm", wrong_groups)
    assert any(
        "parameter groups" in p for p in registry.row_problems("knrm", registry._load(registry.IMPLEMENTATIONS["knrm"]))
    )


@pytest.mark.stage  # Snakemake plans the default config in a new interpreter
def test_a_dry_run_of_the_default_config_imports_no_model_code(tmp_path):
    """The config checks, the floors and the workflow's parse ask the table, never a model class: ``snakemake -n
    report`` on the default config plans every job and imports neither torch nor transformers, spaCy or
    scikit-learn."""
    import subprocess
    import sys

    from conftest import snakemake_command

    cmd, env = snakemake_command(tmp_path, "-n", "report", "--configfile", str(REPO / "config" / "config.yaml"))
    probe = (
        "import json, sys, snakemake.cli\n"
        "try:\n    snakemake.cli.main(sys.argv[1:])\nexcept SystemExit as done:\n    code = done.code\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'spacy', 'sklearn') if m in sys.modules)\n"
        "print('IMPORTED', json.dumps(heavy), code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *cmd[3:]], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    line = [x for x in done.stdout.splitlines() if x.startswith("IMPORTED")]
    assert line, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("rule train:") >= 7, "the dry run planned no training of every model"
    assert line[-1] == "IMPORTED [] 0", done.stdout[-3000:] + done.stderr[-3000:]
