"""Structure of src/longrank, kept by tests: no import cycle (function-local imports and lazy `importlib` imports
included), each layer reaching nothing above it, report modules of a readable size, and the first stage's name
written only where BM25 is implemented."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import networkx as nx
import pytest

from conftest import REPO

SRC = REPO / "src"
PACKAGE = SRC / "longrank"
MAX_REPORT_LINES = 300
BM25_MODULE = "longrank.retrieval.bm25"
DOTTED = re.compile(r"longrank(?:\.\w+)+(?::\w+)?")  # "longrank.models.knrm:KNRM", cli's stage modules


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def parse(name: str) -> ast.Module:
    return ast.parse(MODULES[name].read_text(), filename=str(MODULES[name]))


def type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the import nodes under `if TYPE_CHECKING:`: they never run, so they make no cycle."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skipped


def internal(name: str) -> str | None:
    """The module of the package that importing ``name`` runs (itself, or the package it names)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(name: str) -> dict[str, int]:
    """Modules of the package that ``name`` imports anywhere in its body -> first line. `from pkg import x`
    counts as importing the module pkg.x when x is a module, else pkg itself. String constants naming a
    module (`importlib.import_module` tables: the model registry, the CLI's stages) count too."""
    return _scan(name)[0]


def _scan(name: str) -> tuple[dict[str, int], list[str]]:
    """(imported modules -> first line, imports naming no module of the package)."""
    tree = parse(name)
    skipped = type_checking_only(tree)
    found: dict[str, int] = {}
    missing: list[str] = []

    def add(target: str | None, line: int) -> None:
        if target and target != name:
            found.setdefault(target, line)

    def need(module: str, line: int) -> None:
        if module not in MODULES:
            missing.append(f"{MODULES[name].relative_to(REPO)}:{line}: {module}")

    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "longrank":
                    need(alias.name, node.lineno)
                    add(internal(alias.name), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's package, up level - 1 packages
                package = name if is_package(name) else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{node.module}" if node.module else package
            else:
                base = node.module or ""
            if base.split(".")[0] != "longrank":
                continue
            need(base, node.lineno)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                add(submodule if submodule in MODULES else internal(base), node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and DOTTED.fullmatch(node.value):
            need(node.value.split(":")[0], node.lineno)
            add(internal(node.value.split(":")[0]), node.lineno)
    return found, missing


@functools.cache
def import_graph() -> nx.DiGraph:
    """The package's imports, parsed once per test session (a second each: a dozen tests read it), frozen so that no
    test changes what the next one reads."""
    graph = nx.DiGraph()
    graph.add_nodes_from(MODULES)
    for name in MODULES:
        for target, line in imports_of(name).items():
            graph.add_edge(name, target, line=line)
    return nx.freeze(graph)


def test_the_import_graph_sees_the_package():
    graph = import_graph()
    assert "longrank.models.registry" in graph and "longrank.cli" in graph
    assert graph.number_of_edges() > len(MODULES), "the import graph has almost no edges: is the resolution broken?"


def test_every_internal_import_names_a_module():
    """Lazy imports (function-local, or `importlib` by name) fail only when they run: a renamed module
    must not leave one behind."""
    missing = [m for name in MODULES for m in _scan(name)[1]]
    assert not missing, "imports of modules that do not exist:\n" + "\n".join(missing)


def test_no_import_cycle():
    graph = import_graph()
    cycles = sorted(sorted(nx.simple_cycles(graph), key=len)[:50], key=lambda c: (len(c), c))
    described = []
    for cycle in cycles:
        steps = [f"{a} (line {graph.edges[a, b]['line']}) -> {b}" for a, b in zip(cycle, cycle[1:] + cycle[:1])]
        described.append("\n    ".join(steps))
    assert not cycles, f"{len(cycles)} import cycle(s) in src/longrank:\n  " + "\n  ".join(described)


def test_no_cycle_between_subpackages():
    """Back-references between the package's parts (evaluate -> report -> evaluate, models -> train ->
    models) are cycles one level up even when no two modules import each other."""

    def part(module: str) -> str:
        return ".".join(module.split(".")[:2])

    graph = import_graph()
    parts = nx.DiGraph()
    for a, b, line in graph.edges(data="line"):
        if part(a) != part(b) and not parts.has_edge(part(a), part(b)):
            parts.add_edge(part(a), part(b), via=f"{a} (line {line}) -> {b}")
    cycles = sorted(nx.simple_cycles(parts), key=lambda c: (len(c), c))[:50]
    described = ["\n    ".join(parts.edges[a, b]["via"] for a, b in zip(c, c[1:] + c[:1])) for c in cycles]
    assert not cycles, f"{len(cycles)} cycle(s) between subpackages of longrank:\n  " + "\n  ".join(described)


def test_report_modules_are_short():
    long = {
        str(p.relative_to(REPO)): n
        for p in sorted((PACKAGE / "report").rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > MAX_REPORT_LINES
    }
    assert not long, f"report modules over {MAX_REPORT_LINES} lines (one module per section): {long}"


def bm25_literal(value: str) -> bool:
    return value == "bm25" or "+bm25" in value or "bm25.run" in value


def test_bm25_is_named_only_by_the_bm25_module():
    """First stages are configured by name (`first_stages:`); code outside BM25's own module must take the
    name from the config, never write `"bm25"`, `"+bm25"` or `"bm25.run"` itself."""
    found = []
    for name in MODULES:
        if name == BM25_MODULE:
            continue
        hits = sorted(
            (node.lineno, node.value)
            for node in ast.walk(parse(name))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and bm25_literal(node.value)
        )
        found += [f"{MODULES[name].relative_to(REPO)}:{line}: {value[:80]!r}" for line, value in hits]
    assert not found, f"{len(found)} 'bm25' literal(s) outside {BM25_MODULE}:\n" + "\n".join(found)


def test_the_report_reaches_nothing_in_models_or_train():
    """The report reads files (config.json's resolved_models says what it needs of each model), never the model or
    training code: no report module imports models/ or train/, directly or through any other module."""
    graph = import_graph()
    reached = {}
    for name in (m for m in MODULES if m.startswith("longrank.report")):
        for target in nx.descendants(graph, name):
            if target.startswith(("longrank.models", "longrank.train")):
                reached.setdefault(target, name)
    assert not reached, "report modules that reach models/ or train/: " + ", ".join(
        f"{v} -> {k}" for k, v in reached.items()
    )


# The layers of the house, each as "these modules reach none of those", through any chain of imports. The package
# is read bottom up: the ground (io, digests, progress, tables), the data, the first stages and the evaluation
# beside it, the models, their training, the report beside them (reading files, not code), the stages on top.
# What the workflow's parse imports (the config checks, the floors, the model types' table) sits below the models, so
# that a dry run imports no torch. The models sit below what indexes with them and trains them: HDCT's network in
# models/, its index in retrieval/, the stage that trains it and writes the index in train/.
LAYERS = [
    pytest.param(
        ("errors", "io", "results.code_digest", "progress", "tables", "config.schema"),
        ("",),
        id="the-ground-imports-nothing-of-the-package",
    ),
    pytest.param(
        ("data",),
        ("models", "train", "retrieval", "evaluate", "report", "mir_graphs", "bench", "rerank", "api", "validation")
        + ("config.files",),
        id="data-sits-below-every-stage-that-reads-it",
    ),
    pytest.param(
        ("retrieval",), ("models", "train", "evaluate", "report", "bench", "rerank", "api"), id="first-stages"
    ),
    pytest.param(
        ("evaluate",), ("models", "train", "retrieval", "report", "mir_graphs", "bench", "rerank"), id="evaluation"
    ),
    pytest.param(("mir_graphs",), ("train", "report", "evaluate", "bench"), id="mir-graphs-below-training"),
    pytest.param(("train",), ("report", "evaluate", "bench", "api", "rerank"), id="training-below-its-readers"),
    pytest.param(("bench",), ("report",), id="benches-write-files-the-report-reads"),
    pytest.param(
        ("validation", "config", "floors", "bench.mir_alike", "data.mir_graph_settings", "plan"),
        ("models", "train"),
        id="the-workflows-parse-below-the-models",
    ),
    pytest.param(("floors",), ("report",), id="floors-below-the-report"),
    pytest.param(("models",), ("retrieval", "train"), id="models-below-indexing"),
]


@pytest.mark.parametrize(("lower", "upper"), LAYERS)
def test_a_layer_reaches_nothing_above_it(lower, upper):
    graph = import_graph()
    sources = [m for m in MODULES if m.removeprefix("longrank.").startswith(lower)]
    assert sources, f"no module is named {lower}: a renamed layer must rename its rule"
    targets = tuple(f"longrank.{u}" if u else "longrank." for u in upper)
    # a layer's modules may import each other (the ground's file formats raise its InputError); nothing else above
    reached = sorted(
        (name, target)
        for name in sources
        for target in nx.descendants(graph, name)
        if target.startswith(targets) and target not in sources
    )
    assert not reached, f"{lower} reaches what sits above it: " + ", ".join(f"{a} -> {b}" for a, b in reached[:10])


# The stages that never run a network: each of their jobs pays Python's start-up and nothing more (importing torch
# is ~3-5 s of a 2-core machine's time, in every one of a run's dozens of these jobs).
STAGES_WITHOUT_A_NETWORK = [
    "resolved_config", "data", "doc_field", "candidates", "sanity", "pseudo_queries", "pisa_index", "annotate",
    "graphs", "rerank_run", "annotate_run", "interpolate", "satisfiable", "evaluate", "history", "compare", "export",
]  # fmt: skip


@pytest.mark.stage  # imports every such stage's module in a fresh interpreter
def test_the_stages_without_a_network_import_no_torch_or_sklearn():
    import subprocess
    import sys

    from longrank.cli import STAGES

    modules = [STAGES[stage][0] for stage in STAGES_WITHOUT_A_NETWORK]
    # scikit-learn (~3 s) as well, but in the stage whose graphs weight terms with its TfidfVectorizer (probed last:
    # one process imports them all in turn)
    heavy = {module: ["torch", "sklearn"] for module in modules if module != STAGES["graphs"][0]}
    heavy[STAGES["graphs"][0]] = ["torch"]
    probe = (
        "import importlib, sys\n"
        f"for name, packages in {heavy!r}.items():\n"
        "    importlib.import_module(name)\n"
        "    for package in packages:\n"
        "        if package in sys.modules:\n"
        "            sys.exit(f'{name} imports {package}')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
