"""A researcher's own ranker named in the config (``class:``, docs/your-model.md): the torch-free checks of its entry,
the checks when a job loads its class, and its model built and scored (examples/your_model/kernel_max.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
import yaml

from conftest import REPO
from longrank.config.model_types import capabilities
from longrank.errors import InputError
from longrank.models.registry import build_model, entry_class
from longrank.validation.validate import validate_config
from test_tk_tkl import write_tiny_corpus

EXAMPLE = "examples/your_model/kernel_max.py:KernelMax"
ENTRY = {"class": EXAMPLE, "reads": "words", "max_doc_len": 50, "embeddings": "glove-6b-50d"}


def merged(*files: str) -> dict:
    """The config Snakemake runs from ``--configfile`` files over config/config.yaml (merged key by key)."""

    def merge(base: dict, over: dict) -> dict:
        for key, value in over.items():
            base[key] = (
                merge(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
            )
        return base

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    for name in files:
        config = merge(config, yaml.safe_load((REPO / name).read_text()))
    return config


def with_entry(entry: dict, first_stages: list | None = None) -> dict:
    config = merged("examples/mine.yaml")
    config["models"]["mine"] = entry
    if first_stages is not None:
        config["first_stages"] = first_stages
    return config


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(REPO)  # class paths are relative to the working directory, the user's checkout


def test_the_example_entry_validates_and_declares_what_the_workflow_reads():
    config = validate_config(merged("examples/mine.yaml", "examples/your_model.yaml"))
    entry = config["models"]["kernel_max"]
    declared = capabilities(entry)
    assert declared.document_budget == 200 and not declared.reads_graph_set and declared.speed_bench is None


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"class": "kernel_max.py", "reads": "words", "max_doc_len": 9}, r"models\.mine\.class: .*is not a class"),
        ({"class": "a b:C", "reads": "words", "max_doc_len": 9}, r"models\.mine\.class: .*is not a class"),
        ({"class": "no/such.py:C", "reads": "words", "max_doc_len": 9}, r"models\.mine\.class: no/such\.py is no file"),
        (
            {"class": "no_such_module_here:C", "reads": "words", "max_doc_len": 9},
            r"module 'no_such_module_here' is not",
        ),
        ({"type": "knrm", "class": EXAMPLE, "reads": "words", "max_doc_len": 9}, r"models\.mine: both type"),
        ({"class": EXAMPLE, "max_doc_len": 9}, r"models\.mine\.reads: .*it is missing"),
        ({"class": EXAMPLE, "reads": "letters", "max_doc_len": 9}, r"models\.mine\.reads"),
        ({"class": EXAMPLE, "reads": "words"}, r"models\.mine\.max_doc_len: .*missing"),
        ({"max_doc_len": 9}, r"models\.mine: names no model"),
        ({"type": "knrm", "reads": "words"}, r"models\.mine\.reads: not a key of a 'knrm' model"),
    ],
)
def test_a_bad_entry_is_refused_when_the_config_is_read_naming_the_key(entry, message):
    with pytest.raises(InputError, match=message):
        validate_config(with_entry(entry))


def test_a_class_entry_cannot_rank_the_whole_collection():
    stages = [{"name": "bm25", "method": "bm25", "top_k": 50}, {"name": "own", "method": "model", "model": "mine"}]
    entry = {"class": EXAMPLE, "reads": "words", "max_doc_len": 9, "first_stage": "bm25"}
    with pytest.raises(InputError, match=r"first_stages\.own\.model: 'mine' is your own class, which cannot rank"):
        validate_config(with_entry(entry, stages))


def test_reading_the_config_and_the_code_digest_import_no_torch_and_not_the_class():
    probe = (
        "import json, sys\n"
        "from longrank.validation.validate import validate_config\n"
        "from longrank.train.code import training_code_digest\n"
        f"config = validate_config(json.loads({json.dumps(json.dumps(merged('examples/mine.yaml', 'examples/your_model.yaml')))}))\n"
        "training_code_digest(config['models']['kernel_max'])\n"
        "print(json.dumps(sorted(m for m in sys.modules if m == 'torch' or 'kernel_max' in m)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, env={"PYTHONPATH": str(REPO / "src")}
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == []


def write_class(tmp_path, body: str, name: str = "mine.py") -> str:
    (tmp_path / name).write_text("from longrank.models.base import Ranker\nimport torch\n\n" + body)
    return f"{tmp_path / name}:Mine"


SCORER = """
class Mine(Ranker):
    reads = "words"

    def __init__(self, max_doc_len: int = 10, shape: str = "batch"):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(1))
        self.max_doc_len, self.shape = max_doc_len, shape

    @classmethod
    def from_config(cls, params, corpus):
        return cls(**params)

    def encode(self, queries, doc_ids, docs):
        return {"doc": torch.tensor([[len(d.split())] for d in docs], dtype=torch.float)}

    def forward(self, doc):
        scores = doc[:, 0] * self.w
        return {"batch": scores, "column": scores[:, None], "nan": scores * float("nan")}[self.shape]
"""


def test_the_first_batch_checks_the_scores_shape_and_values(tmp_path):
    spec = write_class(tmp_path, SCORER)
    good = build_model({"class": spec, "reads": "words", "max_doc_len": 10}, None)
    assert good.score_pairs(["q", "q"], ["a", "b"], ["one two", "three"]).tolist() == [2.0, 1.0]
    for shape, message in (
        ("column", r"forward returned \(2, 1\); expected scores of shape \[batch\]"),
        ("nan", "NaN"),
    ):
        model = build_model({"class": spec, "reads": "words", "max_doc_len": 10, "shape": shape}, None)
        with pytest.raises(InputError, match=message):
            model.score_pairs(["q", "q"], ["a", "b"], ["one two", "three"])


@pytest.mark.parametrize(
    "body, entry, message",
    [
        ("import no_such_dependency\nclass Mine: pass\n", {}, "importing .* failed: ModuleNotFoundError"),
        ("class Mine:\n    reads = 'words'\n", {}, "Mine is not a subclass of longrank.models.base.Ranker"),
        ("class Other(Ranker): pass\n", {}, "defines no 'Mine'"),
        (SCORER.replace('reads = "words"', 'reads = "wordpieces"'), {}, "Mine.reads is 'wordpieces', but the entry"),
        (SCORER.replace('reads = "words"', ""), {}, "declares no text it reads"),
        (SCORER, {"kernels": 3}, r"the entry's keys \['kernels'\] are keys of none"),
    ],
)
def test_a_bad_class_is_refused_when_a_job_loads_it(tmp_path, body, entry, message):
    spec = write_class(tmp_path, body, name=f"mine_{abs(hash(body + str(entry)))}.py")
    with pytest.raises(InputError, match=message):
        build_model({"class": spec, "reads": "words", "max_doc_len": 10, **entry}, None)


def test_the_example_builds_and_scores_one_score_per_pair(tmp_path):
    corpus = write_tiny_corpus(tmp_path / "data")
    torch.manual_seed(0)
    model = build_model(ENTRY, corpus)
    assert type(model).__name__ == "KernelMax" and entry_class(ENTRY).default_loss == "pairwise_hinge"
    assert model.max_doc_len == 50
    scores = model.score_pairs(["topic words", "topic"], ["d1", "d2"], ["some topic text", "other words here"])
    assert scores.shape == (2,) and torch.isfinite(scores).all()


def test_loading_an_export_of_a_user_class_without_trust_imports_nothing(tmp_path):
    """The export names its class (ranker.json); without trust_code the load stops before any import of it."""
    from longrank.api import load_ranker
    from longrank.api.export import FORMAT

    (tmp_path / "evil.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")
    export = tmp_path / "export"
    export.mkdir()
    config = {"class": f"{tmp_path / 'evil.py'}:Evil", "reads": "words", "max_doc_len": 9}
    (export / "ranker.json").write_text(
        json.dumps({"format": FORMAT, "name": "evil", "type": "user", "config": config})
    )
    with pytest.raises(InputError, match=r"the class '.*evil\.py:Evil', not one of LongRank's; .*trust_code=True"):
        load_ranker(export)
    assert not (tmp_path / "ran").exists() and not any("evil" in m for m in sys.modules)


def test_a_job_names_the_entry_whose_class_is_refused(tmp_path):
    spec = write_class(tmp_path, SCORER.replace('reads = "words"', 'reads = "wordpieces"'), name="named.py")
    with pytest.raises(InputError, match=r"^models\.mine: class '.*named\.py:Mine': Mine\.reads is 'wordpieces'"):
        build_model({"class": spec, "reads": "words", "max_doc_len": 10}, None, "mine")
