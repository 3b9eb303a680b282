"""Caption notes on a figure's panels: which panel is empty, which repeat each other, which draw nothing but the
reference curve, and why (a reader otherwise takes two identical panels for a plotting bug)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np


def panel_check(
    series: Mapping[str, Sequence[float]],
    reference: Sequence[float] | None = None,
    why: Callable[[str, str], str] | None = None,
) -> str:
    """A caption note on the panels of a figure, one panel per name of ``series`` (what the panel plots): each empty
    one (no finite value, or nothing but zeros), each group of panels that plot the same values, and each panel equal
    to ``reference`` (a line every panel draws, e.g. the first stage's). ``why(kind, name)`` gives the reason
    (``kind``: empty, repeated or reference); without one the note says only what is so. "" when every panel differs."""
    why = why or (lambda kind, name: "")
    values = {n: np.asarray(v, dtype=float) for n, v in series.items()}
    empty = [n for n, v in values.items() if not np.isfinite(v).any() or not np.nansum(np.abs(v)) > 0]
    drawn = {n: v for n, v in values.items() if n not in empty}
    groups: list[list[str]] = []
    for n, v in drawn.items():
        for group in groups:
            if _same(drawn[group[0]], v):
                group.append(n)
                break
        else:
            groups.append([n])
    same_ref = [n for n, v in drawn.items() if reference is not None and _same(np.asarray(reference, float), v)]
    parts = [f"the panel of {n} is empty" + _because(why("empty", n)) for n in empty]
    for group in (g for g in groups if len(g) > 1):
        parts.append(f"the panels of {' and '.join(group)} are identical" + _because(why("repeated", group[0])))
    for n in same_ref:
        parts.append(f"in the panel of {n} the model's curve is the reference curve" + _because(why("reference", n)))
    return "; ".join(parts)[:1].upper() + "; ".join(parts)[1:] + "." if parts else ""


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.allclose(a, b, equal_nan=True))


def _because(reason: str) -> str:
    return f": {reason}" if reason else ""
