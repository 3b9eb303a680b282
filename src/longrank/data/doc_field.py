"""A model's own document fields (``models.<name>.doc_fields``): the fields it reads beyond the collection's text.

The data stage joins ``dataset.doc_fields`` into one ``docs.jsonl`` that every model reads; a model entry that names
``doc_fields`` reads those fields, in that order, instead. The collection's own fields must appear in it as one block
in their order (its text is read from ``docs.jsonl`` as it is, not split again); the other fields come before or
after it, each read from a store of its own that the ``doc_field`` stage writes from the source collection:
``<data dir>/fields/<field>/docs.jsonl`` (+ its index), with ``field.json`` naming the collection's fields. Fields
are joined with a newline, as the data stage joins them. A model entry without ``doc_fields`` reads ``docs.jsonl``
alone: its text is what it was.

Example: the Conformer-Kernel paper (§4) reads "URL, title, and body"; the TREC DL configs' collection has
``doc_fields: [title, body]`` (what TK, TKL, MORES and MIR read), and NDRM's entries ``doc_fields: [url, title,
body]``: the URL, a newline, then the collection's title and body. The authors' code joins the cleaned URL, title
and body with spaces; their cleaning (``text_processing: ck``) turns every character but a-z and 0-9 into a space, so
``https://www.example.com/a-b`` becomes the words ``https www example a b`` (``com`` is one of their stop words)
either way.

A field the source's documents lack (``url`` on a collection without URLs) is an error naming the model's key and the
fields the documents have: taking it as empty would give the model silently other text than its entry says.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from longrank.errors import InputError
from longrank.config.schema import schema_default

FIELDS_DIR = "fields"
FIELD_META = "field.json"


def field_dir(data_dir: str | Path, field: str) -> Path:
    return Path(data_dir) / FIELDS_DIR / field


def split_fields(model_fields: list[str], collection_fields: list[str], where: str) -> tuple[list[str], list[str]]:
    """(fields before, fields after) the collection's block in ``model_fields``; an InputError naming ``where``
    (the config key) when the collection's fields are not one block in their order, or a field repeats."""
    model_fields, collection_fields = list(model_fields), list(collection_fields)
    if len(set(model_fields)) != len(model_fields):
        raise InputError(f"{where}: {model_fields} names a field twice")
    n = len(collection_fields)
    for start in range(len(model_fields) - n + 1):
        if model_fields[start : start + n] == collection_fields:
            return model_fields[:start], model_fields[start + n :]
    raise InputError(
        f"{where}: {model_fields} must hold the collection's fields (dataset.doc_fields) {collection_fields} as one "
        "block in that order (their text is the prepared docs.jsonl's), with other fields before or after it"
    )


def extra_fields(model_fields: list[str] | None, collection_fields: list[str] | None) -> list[str]:
    """The fields a model entry reads beyond the collection's (one ``doc_field`` job each); none without
    ``doc_fields``."""
    return [f for f in (model_fields or []) if f not in (collection_fields or [])]


def model_doc_fields(config: dict, model: str) -> list[str] | None:
    """The fields model entry ``model`` of a resolved config reads: its ``doc_fields``, else the collection's
    (``dataset.doc_fields``; None: the loader's default, every text field)."""
    return config["models"][model].get("doc_fields") or config["dataset"].get("doc_fields")


def field_readers(config: Mapping) -> dict[str, list[str] | None]:
    """Each config key that names the fields a reader of the documents reads (a model entry's ``doc_fields``,
    word2vec's), by its dotted name: what the config check checks and the ``doc_field`` job names in its errors."""
    readers = {
        f"models.{name}.doc_fields": entry.get("doc_fields") for name, entry in (config.get("models") or {}).items()
    }
    readers["word2vec.doc_fields"] = (config.get("word2vec") or {}).get("doc_fields")
    return readers


def check_model_fields(config: dict) -> None:
    """Config check: each model entry's ``doc_fields`` (and word2vec's) holds ``dataset.doc_fields`` as one block
    (which must then be set: the fields beyond it are what the ``doc_field`` stage reads)."""
    collection = config.get("dataset", {}).get("doc_fields")
    for where, fields in field_readers(config).items():
        if fields is None:
            continue
        if not isinstance(fields, list) or not fields or not all(isinstance(f, str) and f for f in fields):
            raise InputError(f"{where}: expected a non-empty list of field names, got {fields!r}")
        if not collection:
            raise InputError(
                f"{where}: set dataset.doc_fields too (the fields docs.jsonl joins), so that the model's fields "
                "beyond them are known"
            )
        split_fields(fields, collection, where)
        if not extra_fields(fields, collection):
            raise InputError(
                f"{where}: {fields} are the collection's fields (dataset.doc_fields) alone; leave doc_fields out"
            )


def source_fields(dataset: dict) -> tuple[list[str], list[str]]:
    """(the fields the collection joins into docs.jsonl, every field its documents have), from its description:
    ir_datasets' document class (no download), or a local file's first record."""
    if dataset.get("source", schema_default("dataset.source")) == "ir_datasets":
        import ir_datasets

        from longrank.data.collections import seed_ir_datasets_cache

        seed_ir_datasets_cache(dataset["id"])
        cls = ir_datasets.load(dataset["id"]).docs_cls()
        available = [f for f in cls._fields if f != "doc_id"]
        default = [f for f in available if cls.__annotations__.get(f) is str]
        return list(dataset.get("doc_fields") or default), available
    from longrank.data.collections import local_file

    path = local_file(dataset, "docs")
    if not str(path).endswith((".jsonl", ".jsonl.gz")):
        return list(dataset.get("doc_fields") or ["text"]), ["text"]
    import gzip

    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        first = json.loads(f.readline() or "{}")
    id_field = dataset.get("id_field") or "doc_id"
    available = [k for k in first if k != id_field]
    return list(dataset.get("doc_fields") or ["text"]), available


def write_field(dataset: dict, field: str, out_dir: str | Path, where: str = "models.<name>.doc_fields") -> int:
    """The ``doc_field`` stage: ``field`` of every document of the source collection into ``out_dir/docs.jsonl``
    (+ index) and ``field.json`` (the field, the collection's fields). An InputError naming ``where`` when the
    documents have no such field."""
    from longrank.data.collections import load_ir_datasets, load_local

    collection, available = source_fields(dataset)
    name = dataset.get("id") or dataset.get("docs")
    if field not in available:
        raise InputError(
            f"{where}: {field!r} is not a field of {name!r} documents (they have {available}); leave it out of the "
            "model's doc_fields"
        )
    if field in collection:
        raise InputError(f"{where}: {field!r} is one of the collection's own fields {collection} (docs.jsonl has it)")
    if dataset.get("source", schema_default("dataset.source")) == "ir_datasets":
        docs, *_ = load_ir_datasets(dataset["id"], [field], dataset.get("query_field"))
    else:
        docs, *_ = load_local({**dataset, "doc_fields": [field]})
    return write_field_store(out_dir, field, docs, collection)


def write_field_store(out_dir: str | Path, field: str, docs, collection_fields: list[str]) -> int:
    """``(doc id, text)`` pairs of ``field`` as its store in ``out_dir`` (``<data dir>/fields/<field>``)."""
    from longrank.data.docstore import write_docs

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    count = write_docs(out / "docs.jsonl", docs)
    (out / FIELD_META).write_text(json.dumps({"field": field, "collection_fields": list(collection_fields)}) + "\n")
    return count


class DocumentFields:
    """A model's document text from its ``doc_fields``: the fields before the collection's, its ``docs.jsonl``
    text, the fields after, joined by newlines (module docstring)."""

    def __init__(self, data_dir: str | Path, model_fields: list[str], where: str = "doc_fields"):
        from longrank.data.docstore import DocStore

        extra = [f for f in model_fields if (field_dir(data_dir, f) / FIELD_META).is_file()]
        missing = [f for f in model_fields if f not in extra]
        if not extra:
            raise InputError(
                f"{where}: none of {list(model_fields)} has a store under {Path(data_dir) / FIELDS_DIR} (the doc_field "
                "stage writes one for each field beyond dataset.doc_fields; without such a field leave doc_fields out)"
            )
        meta = json.loads((field_dir(data_dir, extra[0]) / FIELD_META).read_text(encoding="utf-8"))
        collection = meta["collection_fields"]
        unknown = [f for f in missing if f not in collection]
        if unknown:
            raise InputError(
                f"{where}: no store of the fields {unknown} under {Path(data_dir) / FIELDS_DIR} (the doc_field stage "
                "writes one per field a model names beyond dataset.doc_fields)"
            )
        self.before, self.after = split_fields(model_fields, collection, where)
        self.stores = {f: DocStore(field_dir(data_dir, f) / "docs.jsonl") for f in self.before + self.after}

    def texts(self, doc_ids: list[str], docs: list[str]) -> list[str]:
        """``docs`` (the collection's text of ``doc_ids``) with the model's other fields around each."""
        out = []
        for doc_id, text in zip(doc_ids, docs, strict=True):
            parts = (
                [self._field(f, doc_id) for f in self.before] + [text] + [self._field(f, doc_id) for f in self.after]
            )
            out.append("\n".join(p for p in parts if p))
        return out

    def _field(self, field: str, doc_id: str) -> str:
        store = self.stores[field]
        return store[doc_id] if doc_id in store else ""  # noqa: SIM401 (a DocStore: no .get)


# ---- the doc_field stage (python -m longrank doc_field) ---------------------------------------------------------
def add_arguments(parser):
    parser.add_argument("--dataset", required=True, help="the config's dataset, as JSON")
    parser.add_argument("--field", required=True, help="the document field to write (one a model's doc_fields names)")
    parser.add_argument(
        "--readers", default="", help="the config keys asking for it, comma-separated (named in errors)"
    )
    parser.add_argument("--out-dir", required=True, help="results/{dataset}/data/fields/<field>")


def run(args):
    where = args.readers.replace(",", ", ") or "models.<name>.doc_fields"
    write_field(json.loads(args.dataset), args.field, args.out_dir, where)
