"""Atomic writes, so a failed job never leaves a file that looks complete: each output is written under a temporary
name beside it and renamed over it when whole; a full disk is named by the output being written; a whole directory
is replaced by one rename."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from pathlib import Path
from collections.abc import Iterator


def umask_mode(base: int = 0o666) -> int:
    """The mode ``open()`` (base 0666) or ``mkdir`` (base 0777) gives a new file: ``base`` less the process
    umask (read by setting it, so set back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return base & ~mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it over ``path`` only if the block succeeds. The file
    gets the umask's permissions like any other output (``mkstemp`` makes it 0600, which would leave a report
    on a shared cluster file system readable by its writer only)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        with names_full_disk(path, tmp):
            yield tmp
            os.chmod(tmp, umask_mode())
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


FULL_DISK = (errno.ENOSPC, errno.EDQUOT)


@contextlib.contextmanager
def names_full_disk(path: str | os.PathLike, temporary: str | os.PathLike | None = None) -> Iterator[None]:
    """A full disk (ENOSPC, or a quota: EDQUOT) inside the block is raised naming the output being written, ``path``:
    ``write()`` and ``close()`` raise it without a file name (only ``open()`` has one), and the ``temporary`` name it
    is written under (a file, or a staging directory: its files are named under ``path``) would tell the user
    nothing. The error stays an ``OSError`` of the same errno (the stages' command line prints it as one line,
    ``longrank <stage>: error: no space left on the device writing <path>``)."""
    try:
        yield
    except OSError as err:
        if err.errno not in FULL_DISK:
            raise
        name = err.filename
        if name is None:
            name = str(path)
        elif temporary is not None and (name == str(temporary) or name.startswith(f"{temporary}{os.sep}")):
            name = str(path) + name[len(str(temporary)) :]
        if name == err.filename:
            raise
        raise OSError(err.errno, err.strerror or os.strerror(err.errno), name) from err


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def replace_directory(new: Path, out: Path) -> None:
    """Put the complete directory ``new`` at ``out``; an existing ``out`` is moved aside first and removed
    only after the rename succeeded (put back if it failed)."""
    old = None
    if out.exists() or out.is_symlink():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
        os.rmdir(old)
        os.replace(out, old)
    try:
        os.replace(new, out)
    except BaseException:
        if old is not None:
            os.replace(old, out)
        raise
    if old is not None:
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink()


@contextlib.contextmanager
def staged_directory(out: Path) -> Iterator[Path]:
    """A staging directory beside ``out`` that replaces it when the block ends without an error (removed if not): a
    half-written output directory (a stage's, or one shard's of it) never stands at ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        with names_full_disk(out, staging):  # a full disk names the output, not the staging name
            yield staging
            staging.chmod(umask_mode(0o777))  # mkdtemp makes it 0700: others in a shared results tree could not read it
            replace_directory(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def link_or_copy(source: str, target: str) -> None:
    """A hard link where the file system allows one, else a copy (``shutil.copytree``'s ``copy_function``): for a
    finished checkpoint set, whose files are never written in place (a new set is a new folder, a finished one only
    loses files), so two folders holding the same set share its blocks."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
