"""Table rendering shared by ``evaluate.compare`` (table.md / table.tex) and ``report`` (HTML / Markdown).

It imports neither of them, so both can use it without an import cycle.

A table is (headers, rows) where each cell is a ``Cell``: a text plus optional superscript (the papers'
significance letters). Renderers escape for their format; nothing here computes statistics.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from collections.abc import Sequence

import pandas as pd


# Columns whose values are names, never numbers or missing values: ids (query_id, doc_id), systems and measures,
# letters. Read as written: pandas would read the query id 'NA', 'nan' or 'null' as a missing value and '001' as
# the number 1 (a query id 'NA' would crash compare after every model had trained).
NAME_COLUMNS = ("query_id", "doc_id", "system", "system_a", "system_b", "reference", "measure", "letter", "better_than")


def read_table(path, sep: str = ",", names=NAME_COLUMNS) -> pd.DataFrame:
    """A CSV / TSV table a stage wrote, its name columns (``names``: those of them the file has) as strings exactly
    as written (no missing-value conversion, no number), every other column as pandas reads it (numbers; an empty
    cell or 'nan' is missing there). The one reader of the project's tables: every ``pd.read_csv`` goes through it."""
    columns = pd.read_csv(path, sep=sep, nrows=0).columns
    kept = [c for c in columns if c in names]
    return pd.read_csv(
        path,
        sep=sep,
        dtype={c: str for c in kept},
        keep_default_na=False,
        na_values={c: _MISSING for c in columns if c not in kept},
    )


# pandas' own missing-value spellings (pandas.io.parsers.STR_NA_VALUES), kept for the columns of numbers
_MISSING = sorted(__import__("pandas._libs.parsers", fromlist=["STR_NA_VALUES"]).STR_NA_VALUES)


@dataclass(frozen=True)
class Cell:
    text: str
    sup: str = ""


def cell(value, sup: str = "") -> Cell:
    return value if isinstance(value, Cell) else Cell(fmt(value), sup)


def fmt(value, digits: int = 4) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        if math.isinf(value):
            return "∞" if value > 0 else "−∞"
        if value != 0 and abs(value) < 10 ** (-digits):
            return f"{value:.1e}"
        return f"{value:.{digits}f}"
    return str(value)


def fmt_p(p: float) -> str:
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "–"
    if p == 0:
        return "<1e-300"  # constant non-zero paired difference: the t statistic is infinite
    return f"{p:.2e}" if p < 1e-3 else f"{p:.3f}"


def _cells(rows):
    return [[cell(v) for v in row] for row in rows]


def to_markdown(headers: Sequence[str], rows: Sequence[Sequence]) -> str:
    def md(c: Cell) -> str:
        text = c.text.replace("|", "\\|")
        return f"{text}<sup>{c.sup}</sup>" if c.sup else text

    out = [
        "| " + " | ".join(h.replace("|", "\\|") for h in headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    out += ["| " + " | ".join(md(c) for c in row) + " |" for row in _cells(rows)]
    return "\n".join(out) + "\n"


def latex_escape(text: str) -> str:
    repl = {
        "\\": r"\textbackslash{}",
        "&": r"\&",
        "%": r"\%",
        "$": r"\$",
        "#": r"\#",
        "_": r"\_",
        "{": r"\{",
        "}": r"\}",
        "~": r"\textasciitilde{}",
        "^": r"\textasciicircum{}",
        "–": "--",
        "∞": r"$\infty$",
        "−": "-",
    }
    return "".join(repl.get(ch, ch) for ch in text)


def to_latex(headers: Sequence[str], rows: Sequence[Sequence], caption: str = "", label: str = "") -> str:
    def tex(c: Cell) -> str:
        text = latex_escape(c.text)
        return f"{text}$^{{{c.sup}}}$" if c.sup else text

    cells = _cells(rows)
    align = "l" * min(2, len(headers)) + "r" * max(0, len(headers) - 2)
    lines = [r"\begin{table}[t]", r"\centering"]
    if caption:
        lines.append(r"\caption{" + latex_escape(caption) + "}")
    if label:
        lines.append(r"\label{" + label + "}")
    lines += [
        r"\begin{tabular}{" + align + "}",
        r"\toprule",
        " & ".join(latex_escape(h) for h in headers) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(tex(c) for c in row) + r" \\" for row in cells]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def to_html(headers: Sequence[str], rows: Sequence[Sequence], css_class: str = "") -> str:
    def h(c: Cell) -> str:
        text = html.escape(c.text)
        return f"{text}<sup>{html.escape(c.sup)}</sup>" if c.sup else text

    cls = f' class="{css_class}"' if css_class else ""
    out = [
        f"<table{cls}>",
        "<thead><tr>" + "".join(f"<th>{html.escape(x)}</th>" for x in headers) + "</tr></thead>",
        "<tbody>",
    ]
    out += ["<tr>" + "".join(f"<td>{h(c)}</td>" for c in row) + "</tr>" for row in _cells(rows)]
    out.append("</tbody></table>")
    return "\n".join(out) + "\n"


def effectiveness_rows(
    table: pd.DataFrame,
    systems: Sequence[str] | None = None,
    measures: Sequence[str] | None = None,
    extra: dict[str, dict[str, object]] | None = None,
    extra_columns: Sequence[str] = (),
) -> tuple[list[str], list[list]]:
    """Table 1 style: letter, system, [extra columns], one column per measure with significance letters.

    ``table`` is compare's long ``table.csv``; ``extra[system][column]`` fills ``extra_columns``.
    """
    systems = list(dict.fromkeys(table["system"])) if systems is None else list(systems)
    measures = list(dict.fromkeys(table["measure"])) if measures is None else list(measures)
    extra = extra or {}
    indexed = table.set_index(["system", "measure"])
    letters = dict(zip(table["system"], table["letter"]))
    headers = ["", "System", *extra_columns, *measures]
    rows = []
    for s in systems:
        row: list = [letters.get(s, ""), s]
        row += [cell(extra.get(s, {}).get(c, "")) for c in extra_columns]
        for m in measures:
            if (s, m) in indexed.index:
                r = indexed.loc[(s, m)]
                sup = r["better_than"] if isinstance(r["better_than"], str) else ""
                row.append(Cell(fmt(float(r["mean"])), sup))
            else:
                row.append(Cell("–"))
        rows.append(row)
    return headers, rows


LETTER_NOTE = (
    "A superscript letter on a value means the system is significantly better than the system with that "
    "letter on that measure: two-sided paired Wilcoxon signed-rank test, Holm-corrected across all pairs "
    "of the table (per measure), p < {alpha}."
)
