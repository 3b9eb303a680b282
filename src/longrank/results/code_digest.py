"""Code is an input: a digest of the code a stage runs, so that a change to what a model computes
retrains it and reruns its reranking, and a change to a comment or a docstring does not.

What is digested: the stage's entry module and the model's module (``longrank.models.registry.IMPLEMENTATIONS``), and
every module of this package they import, transitively (``import longrank.x``, ``from longrank.x import y``,
relative imports, at any depth of the code: an import inside a function counts). Not the package's own digest: a
change to one model, or to the report, would then retrain every model. The registry imports the models by name
(``importlib``), so it pulls in none of them: KNRM's digest does not change when TK's code does. Code outside this
package (torch, transformers) is covered by the versions the report lists, not here. A user's own model (``class:``,
docs/your-model.md) is its file and the modules beside it that it imports (``user_code``), read the same way.

How: each module's source is parsed (``ast``) and dumped without its docstrings (module, class and function) and
without line numbers; comments are not in the tree. A change that reformats or comments code keeps the digest; a
change to a constant, an operator or a name changes it. The dump is Python's own, so a new Python version may give
new digests (and retrain): the same code under another interpreter is not known to compute the same.

Used by the training fingerprint (``longrank.train.code.training_code_digest``: ``-R train`` never resumes from
weights of other code) and as a parameter of the train, rerank and report rules (``workflow/rules/common.smk``:
``code_of``; Snakemake's ``params`` rerun trigger, which both shipped profiles keep, reruns a job whose digest
changed). This module names no other module: its callers give the roots (a stage's module, a model's)."""

from __future__ import annotations

import ast
import hashlib
from functools import cache
from collections.abc import Mapping
from pathlib import Path

PACKAGE = "longrank"
ROOT = Path(__file__).resolve().parents[1]  # src/longrank/


def module_path(name: str) -> Path | None:
    """The source file of package module ``name`` (``longrank.a.b``), or None when no file is (an attribute)."""
    parts = name.split(".")
    if parts[0] != PACKAGE:
        return None
    base = ROOT.joinpath(*parts[1:])
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def module_name(path: Path) -> str:
    """The module name of package file ``path`` (``src/longrank/train/train.py``: ``longrank.train.train``)."""
    parts = Path(path).resolve().relative_to(ROOT).with_suffix("").parts
    return ".".join((PACKAGE, *(parts[:-1] if parts[-1] == "__init__" else parts)))


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            first = body[0] if body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                if isinstance(first.value.value, str):
                    node.body = body[1:] or [ast.Pass()]
    return tree


def source_digest(source: str) -> str:
    """The digest of one module's code: its syntax tree without docstrings, line numbers or comments."""
    tree = _without_docstrings(ast.parse(source))
    return hashlib.sha256(ast.dump(tree, include_attributes=False).encode()).hexdigest()


def _imports(tree: ast.AST, name: str, is_package: bool) -> set[str]:
    """The package modules ``tree`` (module ``name``) imports, anywhere in its code."""
    return {m for m in imported_names(tree, name, is_package) if module_path(m) is not None}


def imported_names(tree: ast.AST, name: str, is_package: bool) -> set[str]:
    """Every module name ``tree`` (module ``name``) imports, anywhere in its code (``from a import b``: ``a`` and
    ``a.b``, which may be a submodule); some are attributes, not modules."""
    found: set[str] = set()
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the package this module is in, up level - 1
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # a submodule, when it is one
    return {m.lstrip(".") for m in found}  # a relative import in a script (no package): from its directory


@cache
def _module(name: str) -> tuple[str, frozenset[str]]:
    """(digest, package modules imported) of module ``name``."""
    path = module_path(name)
    if path is None:
        raise ValueError(f"{name} is no module of the package")
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    return source_digest(source), frozenset(_imports(tree, name, path.name == "__init__.py"))


def closure(*roots: str) -> dict[str, str]:
    """Module name -> digest of ``roots`` and every package module they import, transitively."""
    seen: dict[str, str] = {}
    todo = [r for r in roots if module_path(r) is not None]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        digest, imported = _module(name)
        seen[name] = digest
        # a module's parent packages run first when it is imported (their __init__.py)
        parents = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        todo.extend(m for m in imported | parents if m not in seen and module_path(m) is not None)
    return dict(sorted(seen.items()))


def code_digest(*roots: str, files: Mapping[str, str] | None = None) -> str:
    """One digest of the code of ``roots`` and the package modules they import (``closure``), and of a user model's
    ``files`` (``user_code``: path -> digest; none for the papers' models, whose digests stay what they were)."""
    lines = [f"{m} {d}" for m, d in closure(*roots).items()]
    lines += [f"file {path} {d}" for path, d in sorted((files or {}).items())]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def user_code(root: Path, base: Path) -> tuple[dict[str, str], set[str]]:
    """A user model's code: its file ``root`` and every module it imports, transitively, whose file lies under
    ``base`` (the directory its imports are found from: a file's own, a module's ``sys.path`` entry), as path
    relative to ``base`` -> digest; and the package modules those files import (for ``closure``). Modules elsewhere
    (torch, other installed packages) are not digested, as for the papers' models."""
    files: dict[str, str] = {}
    package: set[str] = set()
    todo = [root.resolve()]
    while todo:
        path = todo.pop()
        key = path.relative_to(base).as_posix()
        if key in files:
            continue
        files[key], imported = _user_module(path, base, path.stat().st_mtime_ns)
        for name in imported:
            if module_path(name) is not None:
                package.add(name)
            elif (found := _file_under(base, name)) is not None:
                todo.append(found)
    return files, package


@cache
def _user_module(path: Path, base: Path, mtime_ns: int) -> tuple[str, frozenset[str]]:
    """(digest, module names imported) of a user's file; ``mtime_ns`` keys the cache, so an edited file is read anew."""
    source = path.read_text(encoding="utf-8")
    parts = path.relative_to(base).with_suffix("").parts
    is_package = path.name == "__init__.py"
    name = ".".join(parts[:-1] if is_package else parts)
    names = imported_names(ast.parse(source), name, is_package)
    parents = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}  # their __init__.py run first
    return source_digest(source), frozenset(names | parents)


def _file_under(base: Path, name: str) -> Path | None:
    candidate = base.joinpath(*name.split("."))
    for path in (candidate.with_suffix(".py"), candidate / "__init__.py"):
        if path.is_file():
            return path.resolve()
    return None
