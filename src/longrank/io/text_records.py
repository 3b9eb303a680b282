"""Records of an id and a text, as documents and queries come: ``id<TAB>text`` lines (``read_id_text_tsv``), JSON
lines with an id and text fields (``read_id_text_jsonl``) and TREC SGML documents (``read_trec_docs``). Each error
names the file, the line and what was expected; an id read twice is named with its line."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator

from longrank.errors import InputError
from longrank.io.ids import check_id
from longrank.io.text_files import numbered_lines


def read_tsv_dict(path: str | os.PathLike, what: str = "row") -> dict[str, str]:
    """A two-column ``id<TAB>text`` file with a header row, as a dict (a stage's own ``queries.tsv``,
    ``doc_lengths.tsv``)."""
    return dict(read_id_text_tsv(path, what, header=True))


def read_id_text_tsv(
    path: str | os.PathLike, what: str, header: bool = False, text_required: bool = False, max_bytes: int | None = None
) -> Iterator[tuple[str, str]]:
    """``(id, text)`` of each non-blank ``id<TAB>text`` line (``header``: the first line names the columns). A line
    without a tab, an id that ``check_id`` refuses, an id given twice or (``text_required``) an empty text is an
    InputError naming the line; ``what`` names the records in the message (document, query)."""

    def records():
        for lineno, line in numbered_lines(path, max_bytes):
            if (header and lineno == 1) or not line.strip():
                continue
            rid, sep, text = line.rstrip("\r\n").partition("\t")
            if not sep:
                raise InputError(f"{path}:{lineno}: expected '{what} id<TAB>text', got {line.strip()[:80]!r}")
            yield lineno, check_id(rid, path, lineno, what), _text(text, path, lineno, what, text_required)

    return _each_id_once(records(), path, what)


def read_id_text_jsonl(
    path: str | os.PathLike,
    what: str,
    id_keys: list[str],
    text_keys: list[str],
    text_required: bool = False,
    max_bytes: int | None = None,
) -> Iterator[tuple[str, str]]:
    """``(id, text)`` of each non-blank line, a JSON object with the first of ``id_keys`` it has and any of
    ``text_keys`` (joined by newlines, in that order). Errors name the file, the line and the fields expected; an
    id that is null, an array or an object is named as such (not as a missing field)."""

    def records():
        for lineno, line in numbered_lines(path, max_bytes):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as err:
                raise InputError(
                    f"{path}:{lineno}: not valid JSON ({err.msg}); expected one JSON object per line"
                ) from None
            if not isinstance(rec, dict):
                raise InputError(
                    f"{path}:{lineno}: expected a JSON object with an id and a text field, got {type(rec).__name__}"
                )
            id_key = next((k for k in id_keys if k in rec), None)
            if id_key is None:
                raise InputError(f"{path}:{lineno}: no {what} id field; expected one of {id_keys}")
            rid = rec[id_key]
            if isinstance(rid, int) and not isinstance(rid, bool):
                rid = str(rid)  # a number written without quotes: its digits are the id
            if not isinstance(rid, str):  # null, true, 1.5, a list: no one id a writer meant
                kind = {type(None): "null", bool: "a JSON boolean", list: "a JSON array", dict: "a JSON object"}
                raise InputError(
                    f"{path}:{lineno}: the {what} id ({id_key!r}) is {kind.get(type(rid)) or json.dumps(rid)}"
                    "; expected a string (or an integer)"
                )
            if all(k not in rec for k in text_keys):
                raise InputError(f"{path}:{lineno}: no text field; expected {text_keys}")
            rid = check_id(rid, path, lineno, what)
            _check_text_fields(rec, text_keys, path, lineno, what, rid)
            text = "\n".join(rec[k] for k in text_keys if rec.get(k))
            yield lineno, rid, _text(text, path, lineno, what, text_required)

    return _each_id_once(records(), path, what)


JSON_KINDS = {
    bool: "a JSON boolean",
    int: "a JSON number",
    float: "a JSON number",
    list: "a JSON array",
    dict: "a JSON object",
}


def _check_text_fields(rec: dict, text_keys: list[str], path, lineno: int, what: str, rid: str) -> None:
    """A text field is a string, or null for none: an array, an object, a number or a boolean is refused by record.
    No one text is what its writer meant (a list's items joined how? a number as words?), and storing the value's
    Python form would put brackets and quotes into the text every model reads."""
    for key in text_keys:
        value = rec.get(key)
        if value is not None and not isinstance(value, str):
            raise InputError(
                f"{path}:{lineno}: {what} {rid!r}: the text field {key!r} is {JSON_KINDS.get(type(value), 'not text')}"
                "; expected a string (or null for no text)"
            )


def _text(text: str, path, lineno: int, what: str, required: bool) -> str:
    if required and not text.strip():
        raise InputError(
            f"{path}:{lineno}: this {what} has no text; expected words (give it a text or remove the line)"
        )
    return text


# TREC SGML: <DOC> ... </DOC> blocks, each with one <DOCNO>. Markup is a tag with a tag name (<TEXT>, </HEADLINE>,
# <F P=105>), never a lone '<' or '>' of the text ("a < b > c" keeps its signs).
_DOC_TAG = re.compile(r"<(/?)DOC(?:\s[^<>]*)?>", re.I)
_DOCNO = re.compile(r"<DOCNO>(.*?)</DOCNO>", re.S | re.I)
_MARKUP = re.compile(r"</?[A-Za-z][\w.:-]*(?:\s[^<>]*)?/?>")


def read_trec_docs(path: str | os.PathLike, max_bytes: int | None = None) -> Iterator[tuple[str, str]]:
    """``(docno, text)`` of each ``<DOC>`` block, streamed: the text between the tags with the DOCNO element and
    markup taken out. An unclosed or nested ``<DOC>``, a ``</DOC>`` that closes none, text outside every block, a
    block without exactly one ``<DOCNO>`` or a DOCNO given twice is an InputError naming the file and line."""

    def records():
        opened, parts = None, []  # the line of the open <DOC> and its text so far
        for lineno, line in numbered_lines(path, max_bytes):
            start = 0
            for tag in _DOC_TAG.finditer(line):
                between, start = line[start : tag.start()], tag.end()
                closing = tag.group(1) == "/"
                if opened is None:
                    _outside(path, lineno, between)
                    if closing:
                        raise InputError(f"{path}:{lineno}: </DOC> closes no <DOC>; expected <DOC> first")
                    opened, parts = lineno, []
                    continue
                if not closing:
                    raise InputError(
                        f"{path}:{lineno}: <DOC> inside the <DOC> opened at line {opened}; "
                        "expected </DOC> first (is that one missing its </DOC>?)"
                    )
                parts.append(between)
                yield opened, *_trec_doc(path, opened, "".join(parts))
                opened = None
            if opened is None:
                _outside(path, lineno, line[start:])
            else:
                parts.append(line[start:])
        if opened is not None:
            raise InputError(f"{path}:{opened}: this <DOC> is never closed; expected </DOC> before the end of the file")

    return _each_id_once(records(), path, "document")


def _outside(path, lineno: int, text: str) -> None:
    if text.strip():
        raise InputError(f"{path}:{lineno}: text outside a <DOC> block ({text.strip()[:60]!r}); expected <DOC>")


def _trec_doc(path, lineno: int, block: str) -> tuple[str, str]:
    docnos = _DOCNO.findall(block)
    if len(docnos) != 1:
        raise InputError(
            f"{path}:{lineno}: the <DOC> opened here has {len(docnos) or 'no'} <DOCNO> elements; "
            "expected one <DOCNO>id</DOCNO>"
        )
    docno = check_id(docnos[0].strip(), path, lineno, "document")
    return docno, _MARKUP.sub(" ", _DOCNO.sub(" ", block)).strip()


def _each_id_once(records: Iterator[tuple[int, str, str]], path, what: str) -> Iterator[tuple[str, str]]:
    """``(id, text)`` of ``(line, id, text)`` records; an id seen before in the file is an InputError naming it."""
    seen: set[str] = set()
    for lineno, rid, text in records:
        if rid in seen:
            raise InputError(
                f"{path}:{lineno}: duplicate {what} id {rid!r} (given earlier in the file); ids must be distinct"
            )
        seen.add(rid)
        yield rid, text
