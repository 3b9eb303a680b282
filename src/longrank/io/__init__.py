"""File formats shared by every stage, one strict reader per format, and atomic writes: ``text_files`` (bounded
reading of UTF-8 lines), ``atomic`` (writes and directory replacement), ``json_yaml``, ``ids`` (the one id check),
``trec_files`` (runs, qrels) and ``text_records`` (documents and queries as id and text). Import the module you
need: this one imports none of them. The error they raise is :class:`longrank.errors.InputError`."""
