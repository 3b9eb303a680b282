"""Reading a text file within bounds: a regular file only (not a directory, a device or a named pipe), no larger
than ``dataset.max_file_gb``, UTF-8 lines (gzip-compressed where the name ends in .gz) numbered for the messages, no
line longer than any text has. A UTF-8 byte-order mark at the start of a file is dropped."""

from __future__ import annotations

import gzip
import os
import stat
import zlib
from pathlib import Path
from collections.abc import Iterator

from longrank.errors import InputError


BOM = "\ufeff".encode("utf-8")


#: The longest line any reader takes: no document or query of text is a line of 256 MiB (a 150,000-word document is
#: about 1 MB), so a longer one is a file that is not text (zeros, a sparse file), refused before it fills memory.
MAX_LINE_BYTES = 256 * 2**20


#: The config key bounding a collection file's size (``dataset.max_file_gb``), named when a file passes it.
MAX_FILE_KEY = "dataset.max_file_gb"


def check_regular_file(path: str | os.PathLike, key: str | None = None) -> Path:
    """``path`` if it is a regular file (after symlinks); else an InputError naming the key (when given) and the
    file: a directory, a device (``/dev/zero`` reads without end), a named pipe (read once, with no size to
    check) or a socket is refused before a byte is read."""
    path = Path(path)
    where = f"{key}: " if key else ""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise InputError(f"{where}file {path} not found") from None
    if stat.S_ISREG(mode):
        return path
    kind = next((name for test, name in _NOT_FILES if test(mode)), "not a regular file")
    if stat.S_ISDIR(mode):
        raise InputError(f"{where}{path} is a directory; expected a file")
    raise InputError(
        f"{where}{path} is {kind}, not a regular file; expected a file (a device or a named pipe has no size to "
        "check and may never end: write the text to a file; .gz files are read as they are)"
    )


_NOT_FILES = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
)


def check_file_size(path: str | os.PathLike, max_bytes: int | None, key: str = MAX_FILE_KEY) -> None:
    """An InputError naming the file and ``key`` when the regular file ``path`` is larger than ``max_bytes``."""
    size = Path(path).stat().st_size
    if max_bytes is not None and size > max_bytes:
        raise InputError(
            f"{path}: {_gb(size)} is larger than {key} ({_gb(max_bytes)}); raise {key} if this is the file you meant"
        )


def _gb(size: int) -> str:
    return f"{size / 1e9:.3g} GB"


def numbered_lines(path: str | os.PathLike, max_bytes: int | None = None) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of a UTF-8 text file, gzip-compressed if it ends in ``.gz``. A line that is not
    UTF-8 or a file that is not gzip is an InputError naming the file and line (each line is decoded on its
    own, so the number is exact). Reads are bounded: a path that is not a regular file is refused before it is
    opened, and so is a file larger than ``max_bytes`` (``dataset.max_file_gb``); the bytes read (decompressed, for
    .gz) are counted, so a file that grows past it, or decompresses past it, is stopped there, and no line longer
    than ``MAX_LINE_BYTES`` is held."""
    path = check_regular_file(path)
    check_file_size(path, max_bytes)
    lineno, total = 0, 0
    try:
        with gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb") as f:
            while raw := f.readline(MAX_LINE_BYTES + 1):
                lineno += 1
                total += len(raw)
                if len(raw) > MAX_LINE_BYTES:
                    raise InputError(
                        f"{path}:{lineno}: a line longer than {MAX_LINE_BYTES // 2**20} MiB; expected lines of text "
                        "(is this a text file?)"
                    )
                if max_bytes is not None and total > max_bytes:
                    raise InputError(
                        f"{path}:{lineno}: the file grew (or decompressed) past {MAX_FILE_KEY} ({_gb(max_bytes)}) "
                        f"while it was read; raise {MAX_FILE_KEY} if this is the file you meant"
                    )
                if lineno == 1 and raw.startswith(BOM):  # editors on Windows write one; it is no part of the first id
                    raw = raw[len(BOM) :]
                yield lineno, raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(
            f"{path}:{lineno}: not UTF-8 text (byte {err.object[err.start]:#04x} at column {err.start + 1}); "
            "convert the file to UTF-8, e.g. `iconv -f latin1 -t utf-8`"
        ) from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        raise InputError(f"{path}: not a complete gzip file ({err}); its name ends in .gz") from None
