"""docs/configuration.md is generated from the schema's description: fields (src/longrank/docgen.py); the page must be
what the generator writes from the schema as it is now, and every key of the schema must have a description."""

from __future__ import annotations

from longrank import docgen


def test_configuration_page_is_up_to_date():
    page = docgen.PAGE_PATH.read_text(encoding="utf-8")
    assert page == docgen.current_page(), "docs/configuration.md is out of date: run python -m longrank.docgen"


def test_model_defaults_are_what_the_generator_writes_from_the_classes():
    """src/longrank/config/model_defaults.py is generated; a hand edit or a formatter's rewrite makes ``docgen --check`` fail
    (it did: ruff reformatted the file, and the check went red with no test noticing)."""
    assert docgen.MODEL_DEFAULTS_PATH.read_text(encoding="utf-8") == docgen.current_model_defaults(), (
        "src/longrank/config/model_defaults.py is out of date: run python -m longrank.docgen"
    )
    assert docgen.main(["--check"]) == 0


def test_every_schema_key_has_a_row_and_a_description():
    rows: list = []
    docgen._rows(docgen.load_schema(), "", rows)
    keys = [row[0] for row in rows]
    assert "models.{name}.train.lr" in keys and "first_stages[].top_k" in keys and "pseudo_queries.{set}.source" in keys
    undocumented = [row[0] for row in rows if not row[3]]
    assert not undocumented, f"schema keys without a description: {undocumented}"


def test_a_changed_description_changes_the_page(tmp_path):
    schema = docgen.load_schema()
    schema["properties"]["dataset"]["properties"]["name"]["description"] = "a new meaning | with a bar"
    page = docgen.render(schema)
    assert "| `dataset.name` | string |  | a new meaning \\| with a bar |" in page
    assert page != docgen.current_page()
