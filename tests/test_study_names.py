"""A study's config is named after the page that reports it: ``config/studies/<page>.yaml``, or
``<page>-<what>.yaml`` when the page reports several (``mir-irled.yaml`` and ``mir-irled-cpu.yaml``:
``docs/studies/mir.md``), and the page gives the ``--configfile`` line that runs it."""

from __future__ import annotations

import re

from conftest import REPO

CONFIGS = sorted((REPO / "config" / "studies").glob("*.yaml"))
PAGES = {page.stem: page for page in (REPO / "docs" / "studies").glob("*.md")}
# pages of no study config: the default run (config/config.yaml), a collection's run (config/irled.yaml) and a
# benchmark (benchmarks/scaling.py)
NOT_A_STUDY_CONFIG = {"default-run", "irled", "scaling"}


def page_of(stem: str) -> str | None:
    """The longest page name that is ``stem`` or a ``-``-separated start of it."""
    parts = stem.split("-")
    return next(("-".join(parts[:n]) for n in range(len(parts), 0, -1) if "-".join(parts[:n]) in PAGES), None)


def test_every_study_config_shares_its_name_with_the_page_that_reports_it():
    assert len(CONFIGS) > 10
    for config in CONFIGS:
        page = page_of(config.stem)
        assert page is not None, f"{config.name}: no docs/studies/<page>.md for it; name it <page>[-<what>].yaml"
        command = re.compile(r"--configfile[^`]*config/studies/" + re.escape(config.name))
        assert command.search(PAGES[page].read_text()), (
            f"docs/studies/{page}.md gives no command that runs {config.name}"
        )


def test_every_page_reports_a_study_config_or_says_what_else():
    reported = {page_of(config.stem) for config in CONFIGS}
    assert set(PAGES) - reported == NOT_A_STUDY_CONFIG
