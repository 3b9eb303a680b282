"""The commands and config snippets the README and docs/ show, read from their Markdown, so the tests that run them
run what a reader copies (tests/test_docs_commands.py, tests/test_examples.py, tests/test_export.py)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from conftest import REPO

#: the pages whose commands and snippets a newcomer copies: each is run, dry-run or checked by a test
PAGES = (
    "README.md",
    "docs/your-collection.md",
    "docs/your-model.md",
    "docs/api.md",
    "docs/first-stages.md",
    "docs/slurm.md",
)


#: the fence languages of shell commands
SHELLS = ("bash", "sh", "shell")


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # of the opening fence, 1-based
    language: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(page: str, language: str | None = None) -> list[Block]:
    """The fenced blocks of ``page`` (relative to the repository), of ``language`` when given."""
    text = (REPO / page).read_text()
    found = []
    for match in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
        if language is None or match.group(1) == language:
            line = text.count("\n", 0, match.start()) + 1
            found.append(Block(page, line, match.group(1), match.group(2)))
    return found


def commands(page: str) -> list[tuple[str, list[str]]]:
    """Each command of ``page``'s shell blocks (```bash, ```sh, ```shell), as the shell splits it (continuation lines
    joined, comments and ``a && b`` chains split into their commands), with where it is."""
    found = []
    for block in [b for b in blocks(page) if b.language in SHELLS]:
        for line in block.text.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            while words:
                cut = words.index("&&") if "&&" in words else len(words)
                found.append((block.where, words[:cut]))
                words = words[cut + 1 :]
    return found


def documented(program: str, *first_args: str) -> list[tuple[str, list[str]]]:
    """The documented commands of ``program`` (``snakemake``, ``longrank``) whose arguments start with ``first_args``."""
    return [
        (where, words)
        for page in PAGES
        for where, words in commands(page)
        if words[0] == program and tuple(words[1 : 1 + len(first_args)]) == first_args
    ]
