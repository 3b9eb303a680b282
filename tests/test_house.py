"""The house's limits, checked rather than hoped for: short modules and functions, a README that stays a manual,
one name per module, and docs and code that say what is true now rather than carry the project's history (which
lives in git log)."""

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "longrank"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
MAX_README_LINES = 220
# generated from the model classes (python -m longrank.docgen), not written by hand
GENERATED = {PACKAGE / "config" / "model_defaults.py"}


def modules():
    return sorted(p for p in PACKAGE.rglob("*.py") if "bundled" not in p.parts and p not in GENERATED)


def test_no_module_is_over_the_limit():
    long = {str(p.relative_to(ROOT)): n for p in modules() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split by role): {long}"


def test_no_function_is_over_the_limit():
    long = []
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_the_readme_stays_a_manual():
    lines = len((ROOT / "README.md").read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; details belong in docs/"


def test_one_name_per_module():
    """Two modules of one name in different packages are two things a reader confuses (which ``hdct.py``?). A
    package's ``__init__`` and its stage module named as the package (``train/train.py``) are the exceptions."""
    by_name = defaultdict(list)
    for path in modules():
        if path.name != "__init__.py":
            by_name[path.stem].append(str(path.relative_to(PACKAGE)))
    same = {
        name: paths
        for name, paths in by_name.items()
        if len(paths) > 1 and not all(Path(p).parent.name == name or Path(p).parent == Path(".") for p in paths)
    }
    assert not same, f"modules sharing a name: {same}"


def test_one_class_per_name():
    classes = defaultdict(list)
    for path in modules():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                classes[node.name].append(str(path.relative_to(PACKAGE)))
    same = {name: paths for name, paths in classes.items() if len(paths) > 1}
    assert not same, f"classes sharing a name: {same}"


HISTORY = re.compile(r"\b[Ii]ssue [0-9]+|\b[Ss]top [0-9]+\b|[Mm]oved from the README")


@pytest.mark.parametrize("place", ["docs", "src", "config", "workflow", "README.md"])
def test_no_history_in_docs_or_code(place):
    root = ROOT / place
    files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file() and p.suffix in {
        ".md", ".py", ".yaml", ".yml", ".smk", ".txt"} and "bundled" not in p.parts]  # fmt: skip
    hits = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in files
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if HISTORY.search(line)
    ]
    assert not hits, "history belongs in git log; say what is true now:\n" + "\n".join(hits[:20])
