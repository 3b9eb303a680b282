"""Progress bars that suit where stderr goes: tqdm's redrawn bar on a terminal, and whole lines when stderr is a
file (the workflow's rules send every job's stderr to ``results/{dataset}/logs/<rule>_<model>.log``, which
``tail -f`` follows): one line per 5% of a known total, or one a minute without a total, plus the last, instead of
carriage-return redraws. ``progress(...)`` takes tqdm's arguments."""

from __future__ import annotations

import math
import os
import re
import sys

from tqdm import tqdm

#: a line per this share of the total when stderr is not a terminal
LINE_EVERY = 0.05
#: without a total, a line per this many seconds
LINE_SECONDS = 60.0
#: no bar and no line for work that ends within this many seconds (tqdm's ``delay``): a bar for one quick call, e.g.
#: an exported ranker's ``score()`` of a few documents, is noise
QUIET_SECONDS = 1.0
_CONTROL = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\r")


class _Lines:
    """A stream for tqdm that writes each display as one line (redraw controls dropped)."""

    def __init__(self, stream):
        self.stream, self.last = stream, None

    def write(self, text: str) -> None:
        line = _CONTROL.sub("", text).strip()
        count = line.split("[", 1)[0]  # description, percentage and count: the closing refresh repeats the last one
        if line and count != self.last:
            self.stream.write(line + "\n")
            self.last = count

    def flush(self) -> None:
        self.stream.flush()


def is_terminal(stream=None) -> bool:
    stream = sys.stderr if stream is None else stream
    return bool(getattr(stream, "isatty", lambda: False)())


def progress(iterable=None, **kwargs) -> tqdm:
    """``tqdm(iterable, **kwargs)`` on a terminal; line-based progress otherwise (module docstring); nothing for work
    done within ``QUIET_SECONDS`` unless ``delay`` says otherwise."""
    kwargs.setdefault("delay", QUIET_SECONDS)
    stream = kwargs.pop("file", None) or sys.stderr
    if is_terminal(stream):
        return tqdm(iterable, file=stream, **kwargs)
    total = kwargs.get("total")
    if total is None and iterable is not None and hasattr(iterable, "__len__"):
        total = len(iterable)
    if total:
        kwargs.update(miniters=max(1, math.ceil(total * LINE_EVERY)), mininterval=0)
    else:
        kwargs.update(mininterval=LINE_SECONDS)
    return tqdm(iterable, file=_Lines(stream), ascii=True, dynamic_ncols=False, ncols=100, **kwargs)


def to_console(line: str) -> None:
    """Echo a line that should reach a person on the console to stdout as well, when stderr goes elsewhere: under the
    workflow a rule sends a job's stderr (its log) to a file and leaves stdout on Snakemake's console, so training's
    dev evaluations show there without opening the log. Nothing is echoed where both are one stream (a terminal)."""
    try:
        same = os.path.samestat(os.fstat(sys.stdout.fileno()), os.fstat(sys.stderr.fileno()))
    except (OSError, ValueError, AttributeError):  # a stream without a file (captured, closed)
        return
    if not same:
        print(line, flush=True)
