"""Query formulation for long queries (IRLeD's queries are whole court cases): keep the text, keep its
first N words, or keep its N highest tf-idf terms with IDF from the document collection (scikit-learn).

Short texts (pseudo-queries formulated from passages of short documents) adapt: a text of fewer than N words or
terms keeps all it has; no texts give no queries. A collection in which tf-idf finds no term at all (every word a
stop word or without a letter) stops with an ``InputError`` naming ``query_formulation.method``: no text could
keep a term."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from longrank.errors import InputError
from longrank.config.schema import schema_default


def formulate(
    queries: dict[str, str],
    docs: Mapping[str, str],
    method: str = schema_default("query_formulation.method"),
    n: int = schema_default("query_formulation.n"),
) -> dict[str, str]:
    if method == "full":
        return dict(queries)
    if method == "first_words":
        return {qid: " ".join(text.split()[:n]) for qid, text in queries.items()}
    if method == "tfidf_terms":
        return _top_tfidf_terms(queries, docs, n) if queries else {}  # scikit-learn refuses to transform no texts
    raise InputError(f"query_formulation.method: {method!r}; expected full, first_words or tfidf_terms")


def _top_tfidf_terms(queries: dict[str, str], docs: Mapping[str, str], n: int) -> dict[str, str]:
    from sklearn.feature_extraction.text import TfidfVectorizer

    # IDF from the documents (the collection the terms must discriminate in); English stop words and
    # tokens without a letter (case numbers, years) carry no topical signal.
    vectorizer = TfidfVectorizer(stop_words="english", token_pattern=r"(?u)\b[^\W\d_][\w-]*\b", sublinear_tf=True)
    try:
        vectorizer.fit(docs.values())
    except ValueError as err:  # scikit-learn: "empty vocabulary; perhaps the documents only contain stop words"
        raise InputError(
            f"query_formulation.method: tfidf_terms finds no term in the {len(docs)} documents ({err}); "
            "set query_formulation.method: full or first_words"
        ) from None
    vocab = vectorizer.get_feature_names_out()
    qids = list(queries)
    matrix = vectorizer.transform([queries[q] for q in qids]).tocsr()
    out = {}
    for row, qid in enumerate(qids):
        start, end = matrix.indptr[row], matrix.indptr[row + 1]
        cols, weights = matrix.indices[start:end], matrix.data[start:end]
        order = np.lexsort((vocab[cols], -weights))[:n]  # by weight, ties by term: deterministic
        out[qid] = " ".join(vocab[cols[order]])
    return out
