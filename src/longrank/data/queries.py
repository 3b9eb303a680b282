"""Query formulation for long queries (IRLeD's queries are whole court cases): keep the text, keep its
first N words, or keep its N highest tf-idf terms with IDF from the document collection (scikit-learn)."""

from __future__ import annotations

import numpy as np

from longrank.io import InputError


def formulate(queries: dict[str, str], docs: dict[str, str], method: str = "full", n: int = 25) -> dict[str, str]:
    if method == "full":
        return dict(queries)
    if method == "first_words":
        return {qid: " ".join(text.split()[:n]) for qid, text in queries.items()}
    if method == "tfidf_terms":
        return _top_tfidf_terms(queries, docs, n)
    raise InputError(f"query_formulation.method: {method!r}; expected full, first_words or tfidf_terms")


def _top_tfidf_terms(queries: dict[str, str], docs: dict[str, str], n: int) -> dict[str, str]:
    from sklearn.feature_extraction.text import TfidfVectorizer

    # IDF from the documents (the collection the terms must discriminate in); English stop words and
    # tokens without a letter (case numbers, years) carry no topical signal.
    vectorizer = TfidfVectorizer(stop_words="english", token_pattern=r"(?u)\b[^\W\d_][\w-]*\b", sublinear_tf=True)
    vectorizer.fit(docs.values())
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
