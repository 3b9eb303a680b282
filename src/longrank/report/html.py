"""A report page as a list of sections of blocks, rendered to one self-contained HTML file and to Markdown."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Sequence

from longrank.tables import to_html, to_markdown

CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{border-bottom:2px solid #444}h2{margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.8em 0;font-size:.9em}
th,td{padding:.25em .7em;border-bottom:1px solid #ddd;text-align:right}
th:first-child,td:first-child,th:nth-child(2),td:nth-child(2){text-align:left}
thead th{border-bottom:2px solid #444;background:#f5f5f5}
sup{color:#0a5;font-weight:600}
.note{color:#666;font-style:italic}.warning{background:#fff4e5;border-left:4px solid #e80;padding:.5em 1em}.howto{background:#f4f8ff;border-left:4px solid #48c;padding:.5em 1em}
img{max-width:100%;border:1px solid #eee}pre{background:#f7f7f7;padding:.8em;overflow-x:auto;font-size:.85em}
figcaption{color:#555;font-size:.9em}.figure-note{color:#844;font-size:.9em;margin:.2em 0 0}
details{margin:.8em 0}summary{cursor:pointer;color:#333}
"""


@dataclass
class Block:
    kind: str  # text | note | warning | howto | table | image | code | details
    text: str = ""  # an image's caption, a details block's one-line summary
    headers: Sequence[str] = ()
    rows: Sequence[Sequence] = ()
    path: Path | None = None
    body: str = ""  # a details block's folded text (pre-formatted); an image's note on an empty or repeated panel


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)

    def text(self, text: str) -> Section:
        self.blocks.append(Block("text", text))
        return self

    def note(self, text: str) -> Section:
        self.blocks.append(Block("note", text))
        return self

    def not_run(self, why: str) -> Section:
        """The section (or a part of it) has nothing to show: ``why`` names the config key that switched it off or the
        input that is missing (``attention_scaling.enabled: false``), never just "skipped"."""
        if not why.strip():
            raise ValueError(f"section {self.title!r}: a part that did not run must say why")
        self.blocks.append(Block("note", f"Not run: {why.rstrip('.')}."))
        return self

    @property
    def ran(self) -> bool:
        """Whether the section shows anything beyond notes saying why it did not run."""
        return not all(b.kind == "note" and b.text.startswith("Not run:") for b in self.blocks)

    def warning(self, text: str | None) -> Section:
        """A caveat that changes how everything below it reads (none: nothing is added)."""
        if text:
            self.blocks.append(Block("warning", text))
        return self

    def howto(self, text: str) -> Section:
        self.blocks.append(Block("howto", text))
        return self

    def table(self, headers, rows, caption: str = "") -> Section:
        # A short row would shift every later cell under the wrong header, silently.
        bad = next((row for row in rows if len(row) != len(headers)), None)
        if bad is not None:
            raise ValueError(
                f"table {caption or self.title!r}: a row has {len(bad)} cells for {len(headers)} "
                f"columns {list(headers)}: {[str(c) for c in bad]}"
            )
        self.blocks.append(Block("table", caption, headers, rows))
        return self

    def image(self, path: Path, caption: str = "", panel_note: str = "") -> Section:
        """A figure; ``panel_note`` says which of its panels are empty or repeat another, and why (plots.py's checks)."""
        self.blocks.append(Block("image", caption, body=panel_note, path=Path(path)))
        return self

    def details(self, summary: str, body: str) -> Section:
        """Pre-formatted ``body`` folded under a one-line ``summary`` (HTML ``<details>``, collapsed)."""
        self.blocks.append(Block("details", summary, body=body))
        return self

    def code(self, text: str) -> Section:
        self.blocks.append(Block("code", text))
        return self


NOT_RUN_TITLE = "Not run in this report"


def not_run_listed_once(sections: Sequence[Section]) -> list[Section]:
    """The sections that show something, in order, then one section listing those that did not run, each with why
    (its ``not_run`` notes): a reader scrolls past no empty stubs, and still learns what switched each one off."""
    skipped = [s for s in sections if not s.ran]
    shown = [s for s in sections if s.ran]
    if skipped:
        rows = [[s.title, " ".join(b.text.removeprefix("Not run: ") for b in s.blocks)] for s in skipped]
        shown.append(Section(NOT_RUN_TITLE).table(["Section", "Why not"], rows))
    return shown


def render_html(title: str, sections: Sequence[Section]) -> str:
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    toc = "".join(f'<li><a href="#s{i}">{html.escape(s.title)}</a></li>' for i, s in enumerate(sections, 1))
    out.append(f"<ol>{toc}</ol>")
    for i, s in enumerate(sections, 1):
        out.append(f'<h2 id="s{i}">{i}. {html.escape(s.title)}</h2>')
        for b in s.blocks:
            if b.kind == "text":
                out.append(f"<p>{html.escape(b.text)}</p>")
            elif b.kind == "note":
                out.append(f'<p class="note">{html.escape(b.text)}</p>')
            elif b.kind == "warning":
                out.append(f'<p class="warning"><b>Warning:</b> {html.escape(b.text)}</p>')
            elif b.kind == "howto":
                out.append(f'<p class="howto"><b>How to read this:</b> {html.escape(b.text)}</p>')
            elif b.kind == "table":
                if b.text:
                    out.append(f"<p><b>{html.escape(b.text)}</b></p>")
                out.append(to_html(b.headers, b.rows))
            elif b.kind == "image":
                assert b.path is not None, "an image block names its file"
                data = base64.b64encode(b.path.read_bytes()).decode("ascii")
                note = f'<p class="figure-note"><b>Note:</b> {html.escape(b.body)}</p>' if b.body else ""
                out.append(
                    f'<figure><img alt="{html.escape(b.path.name)}" src="data:image/png;base64,{data}">'
                    f"<figcaption>{html.escape(b.text)}{note}</figcaption></figure>"
                )
            elif b.kind == "details":
                out.append(
                    f"<details><summary>{html.escape(b.text)}</summary>"
                    f"<pre>{html.escape(b.body, quote=False)}</pre></details>"
                )
            elif b.kind == "code":
                out.append(f"<pre>{html.escape(b.text, quote=False)}</pre>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def render_markdown(title: str, sections: Sequence[Section]) -> str:
    out = [f"# {title}", ""]
    for i, s in enumerate(sections, 1):
        out += [f"## {i}. {s.title}", ""]
        for b in s.blocks:
            if b.kind == "text":
                out += [b.text, ""]
            elif b.kind == "note":
                out += [f"*{b.text}*", ""]
            elif b.kind == "warning":
                out += [f"> **Warning:** {b.text}", ""]
            elif b.kind == "howto":
                out += [f"> **How to read this:** {b.text}", ""]
            elif b.kind == "table":
                if b.text:
                    out += [f"**{b.text}**", ""]
                out += [to_markdown(b.headers, b.rows)]
            elif b.kind == "image":
                assert b.path is not None, "an image block names its file"
                out += [f"![{b.text}]({b.path.parent.name}/{b.path.name})", "", f"*{b.text}*", ""]
                if b.body:
                    out += [f"**Note:** {b.body}", ""]
            elif b.kind == "details":  # folded where the Markdown renderer knows <details> (GitHub, GitLab)
                out += [
                    "<details>",
                    f"<summary>{html.escape(b.text)}</summary>",
                    "",
                    "```",
                    b.body,
                    "```",
                    "",
                    "</details>",
                    "",
                ]
            elif b.kind == "code":
                out += ["```", b.text, "```", ""]
    return "\n".join(out) + "\n"
