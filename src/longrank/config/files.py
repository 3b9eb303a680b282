"""The config files under config/ and what each is merged over. config/config.yaml is Snakemake's default configfile;
every other file is an overlay, and its first line names the files it is merged over, in ``--configfile`` order,
config/config.yaml first:

    # Overlay over: config/config.yaml config/irled.yaml

A file that is no run on its own, only a base of others (config/trec-dl.yaml: a year's config is merged over it), adds
``; a base only`` after the list. Snakemake merges each ``--configfile`` over the ones before it key by key
(:func:`merged`), so an overlay means what it says only over its bases: :func:`check_order` fails a ``--configfile``
line that leaves one out or puts it after, and :func:`configfiles` gives the line that runs a file over its bases.
The config matrix (tests/test_config_matrix.py) dry-runs every overlay over its stated bases."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


from longrank.config.schema import DATASETS, REPO
from longrank.errors import InputError
from longrank.io.json_yaml import load_yaml

DEFAULT_CONFIG = "config/config.yaml"
HEADER = "# Overlay over:"
BASE_ONLY = "a base only"


@dataclass(frozen=True)
class Overlay:
    path: str  # relative to the repository root, as the --configfile line names it: config/studies/mir.yaml
    bases: tuple[str, ...]  # what it is merged over, in --configfile order, config/config.yaml first
    base_only: bool  # a base of other overlays, not run on its own


def read_overlay(path: str, repo: Path = REPO) -> Overlay:
    """``path``'s header, checked: it names config/config.yaml first and only files that exist."""
    with open(repo / path, encoding="utf-8") as f:
        first = f.readline().rstrip("\n")
    example = f"'{HEADER} {DEFAULT_CONFIG} config/irled.yaml'"
    if not first.startswith(HEADER):
        raise InputError(
            f"{path}, line 1: an overlay's first line names what it is merged over ({example}); got {first!r}"
        )
    listed, _, note = first.removeprefix(HEADER).partition(";")
    bases = tuple(listed.split())
    if not bases or bases[0] != DEFAULT_CONFIG:
        raise InputError(f"{path}, line 1: the bases start with {DEFAULT_CONFIG} (merged first), e.g. {example}")
    missing = [base for base in bases if not (repo / base).is_file()]
    if missing:
        raise InputError(f"{path}, line 1: names bases that do not exist: {', '.join(missing)}")
    if path in bases:
        raise InputError(f"{path}, line 1: names itself as its own base")
    return Overlay(path, bases, note.strip().startswith(BASE_ONLY))


def overlays(repo: Path = REPO) -> list[Overlay]:
    """Every config file under config/ but the default and the collection descriptions (config/datasets/, read by
    name, never passed as a --configfile)."""
    paths = sorted(p.relative_to(repo).as_posix() for p in (repo / "config").rglob("*.yaml"))
    return [read_overlay(p, repo) for p in paths if p != DEFAULT_CONFIG and not p.startswith(f"{DATASETS}/")]


def check_order(configfiles: Iterable[str], repo: Path = REPO) -> None:
    """Fail when an overlay of a ``--configfile`` line comes without each of its bases before it, in their order."""
    before: list[str] = [DEFAULT_CONFIG]
    for path in configfiles:
        remaining = iter(before)
        if not all(base in remaining for base in read_overlay(path, repo).bases):  # an in-order subsequence
            raise InputError(
                f"--configfile {' '.join(before[1:] + [path])}: {path} is merged over "
                f"{' '.join(read_overlay(path, repo).bases)}, in that order"
            )
        before.append(path)


def configfiles(path: str, repo: Path = REPO) -> tuple[str, ...]:
    """The ``--configfile`` line that runs ``path`` over its stated bases (config/config.yaml is Snakemake's
    default: never named)."""
    return (*read_overlay(path, repo).bases[1:], path)


def merged(configfiles: Iterable[str], repo: Path = REPO) -> dict:
    """The config Snakemake sees: config/config.yaml with each file merged over it in order by Snakemake's own merge
    (mappings key by key; anything else, a ``dataset:`` name or a list, replaced whole)."""
    from snakemake.utils import update_config

    config: dict = {}
    for path in (DEFAULT_CONFIG, *configfiles):
        update_config(config, load_yaml((repo / path).read_text(encoding="utf-8")) or {})
    return config


def check_command_line(paths: Iterable[str | Path], repo: Path = REPO) -> None:
    """A run's ``--configfile`` files as Snakemake got them (workflow/rules/common.smk, before validation, so that an
    overlay run without its bases is named as such rather than failing on a key it lacks): the shipped overlays among
    them (files under the checkout's config/) each after its bases, in their order, and a base-only file never last.
    A user's own files (anywhere else) may stand anywhere."""
    config_dir = (repo / "config").resolve()
    given = [Path(path).resolve() for path in paths]
    shipped = [path.relative_to(repo.resolve()).as_posix() for path in given if path.is_relative_to(config_dir)]
    shipped = [path for path in shipped if path != DEFAULT_CONFIG and not path.startswith(f"{DATASETS}/")]
    check_order(shipped, repo)
    if given and given[-1].is_relative_to(config_dir):
        last = given[-1].relative_to(repo.resolve()).as_posix()
        if last != DEFAULT_CONFIG and read_overlay(last, repo).base_only:
            users = [o.path for o in overlays(repo) if last in o.bases]
            raise InputError(
                f"--configfile ends with {last}, a base only (alone it runs its settings on the default collection): "
                f"follow it with a file merged over it, e.g. --configfile {' '.join(configfiles(users[0], repo)) if users else '…'}"
            )
