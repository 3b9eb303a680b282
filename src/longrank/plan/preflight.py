"""The checks the workflow runs around its jobs: the downloads the planned jobs read, and the ownership and lock of
the results folder (longrank.results.lock). Snakemake's lock and records are in the working directory's
.snakemake/, not beside the outputs, so a checkout whose results/ is another's (a symlink) would count that one's
outputs up to date: another working directory's config on these results is refused at parse, dry runs included,
and the lock on the results folder itself is taken when jobs start and released when they end."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterable

from longrank import downloads
from longrank.results.lock import acquire, check_owner, path_errors, release


def planned_names(wildcard_values: Iterable[Iterable]) -> set[str]:
    """Every wildcard value of the planned jobs (each job's values as Snakemake's Namedlist gives them)."""
    return {str(value) for values in wildcard_values for value in values}


def check_downloads(config: dict, planned: set[str]) -> tuple[list[str], str | None]:
    """The notes on hub models the first job will download, and the refusal naming each missing download the
    planned jobs read, with its key, what to get and where to put it (longrank.downloads), or None."""
    problems, notes = downloads.check(config, planned=planned)
    return notes, ("missing downloads, before any job runs:\n" + "\n".join(problems) if problems else None)


@dataclass(frozen=True)
class ResultsOwner:
    """One workflow's hold on its results folder: ``config`` as validated (what the owner record's digest is of)
    from working directory ``workdir``."""

    results: Path
    workdir: Path
    config: dict

    def check(self) -> None:
        """Refuses results another working directory's config owns (InputError)."""
        with path_errors(self.results):
            check_owner(self.results, self.workdir, self.config)

    def take(self, locking: bool) -> None:
        """The lock on the results folder, unless ``locking`` is off (--nolock: the user's word that nothing else
        runs here)."""
        if locking:
            with path_errors(self.results):
                acquire(self.results, self.workdir, self.config)

    def release(self) -> None:
        with path_errors(self.results):
            release(self.results)
