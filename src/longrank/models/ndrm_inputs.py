"""What NDRM (:mod:`longrank.models.ndrm`) checks and reads before its forward pass: its settings, and the text of
queries and documents as the ids and counts it scores (``NDRMInputs``: the words through the vocabulary's processing,
the authors' document markers, term frequencies and lengths)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from longrank.data.words import OOV, PAD, TEXT_PROCESSING
from longrank.data.words import query_terms as split_query
from longrank.errors import InputError
from longrank.models.modules.positions import LAYOUTS
from longrank.models.ndrm_terms import IDF_FORMULAS

if TYPE_CHECKING:
    from longrank.data.doc_field import DocumentFields
    from longrank.models.modules.word_embedder import WordEmbedder

VARIANTS = ("ndrm1", "ndrm2", "ndrm3")
DOC_MARKERS = ("<S>", "</S>")  # the authors' document start and end tokens (ids past the vocabulary's, own rows)
PAD_ROWS = ("zero", "unknown")  # a document's padding: the zero row, or the unknown-word row (the authors')
WORDS_WITHOUT_VECTORS = ("own_row", "unknown")  # a vocabulary word without a pretrained vector, in the latent model
UNKNOWN_QUERY_WORDS = ("masked", "scored")  # a query word outside the vocabulary: left out, or the authors' UNK row


def check_choices(
    variant: str,
    text_processing: str,
    idf_formula: str,
    position_layout: str,
    pad_row: str,
    words_without_vectors: str,
    unknown_query_words: str,
) -> None:
    choices = {
        "position_layout": (position_layout, LAYOUTS),
        "pad_row": (pad_row, PAD_ROWS),
        "words_without_vectors": (words_without_vectors, WORDS_WITHOUT_VECTORS),
        "unknown_query_words": (unknown_query_words, UNKNOWN_QUERY_WORDS),
    }
    for key, (value, options) in choices.items():
        if value not in options:
            raise InputError(f"{key}: {value!r} is not one of {list(options)}")
    if variant not in VARIANTS:
        raise InputError(f"variant: {variant!r} is not one of {list(VARIANTS)}")
    if text_processing not in TEXT_PROCESSING:
        raise InputError(f"text_processing: {text_processing!r} is not one of {list(TEXT_PROCESSING)}")
    if idf_formula not in IDF_FORMULAS:
        raise InputError(f"idf_formula: {idf_formula!r} is not one of {list(IDF_FORMULAS)}")


def check_sizes(impact_depth: int | None, **sizes: int) -> None:
    """Positive sizes (``n_layers`` may be 0: no Conformer layer; ``impact_depth`` null: every document)."""
    for key, value in sizes.items():
        if int(value) < 1 and not (key == "n_layers" and value == 0):
            raise InputError(f"{key}: must be a positive integer, got {value!r}")
    if impact_depth is not None and int(impact_depth) < 1:
        raise InputError(
            f"impact_depth: must be a positive integer or null (keep every document), got {impact_depth!r}"
        )


class NDRMInputs:
    """NDRM's text as ids and counts (a base of :class:`longrank.models.ndrm.NDRM`, which sets what these read:
    ``embedder``, ``max_query_len``, ``max_doc_len``, ``doc_markers``, ``score_padding_windows``, ``score_unknown``,
    ``fields`` and ``_analyze``)."""

    embedder: WordEmbedder
    max_query_len: int
    max_doc_len: int
    doc_markers: bool
    score_padding_windows: bool
    score_unknown: bool
    fields: DocumentFields | None
    _analyze: Callable[[str], list[str]] | None  # None: the ``words`` processing, the embedder's

    def _query_words(self, text: str) -> list[str]:
        """A query's processed words, out-of-vocabulary ones included, truncated to ``max_query_len``: ``words``
        processing is the embedder's (stop words as ``remove_query_stopwords`` says), ``ck`` the authors' (their
        stop words always removed; a query of stop words only has no terms, as theirs)."""
        if self._analyze is None:
            return split_query(text, self.embedder.remove_query_stopwords)[: self.max_query_len]
        return self._analyze(text)[: self.max_query_len]

    def query_terms(self, text: str) -> list[str]:
        """The terms the model scores ``text`` by (:mod:`longrank.models.ndrm`): Σ term_scores over them = the score.
        With ``unknown_query_words: scored`` every word, those outside the vocabulary too (through the unknown-word
        row)."""
        words = self._query_words(text)
        return words if self.score_unknown else [w for w in words if self.embedder.vocab.index.get(w, OOV) > OOV]

    def _query_ids(self, queries: list[str]) -> torch.Tensor:
        index = self.embedder.vocab.index
        rows = [[index.get(w, OOV) for w in self._query_words(q)] for q in queries]
        out = torch.full((len(rows), max(1, max((len(r) for r in rows), default=0))), PAD, dtype=torch.long)
        for i, row in enumerate(rows):
            out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        return out

    def _doc_ids(self, docs: list[str]) -> torch.Tensor:
        """Documents -> ids [D, L] (through the vocabulary's processing), at most ``max_doc_len`` terms; with
        ``doc_markers`` <S> first and </S> last, then truncated (a long document loses </S>, as the authors'); with
        ``score_padding_windows`` every row padded to ``max_doc_len``."""
        vocab = self.embedder.vocab
        start, end = len(vocab), len(vocab) + 1
        rows = [vocab.ids(text, self.max_doc_len) for text in docs]
        if self.doc_markers:
            rows = [([start] + row + [end])[: self.max_doc_len] for row in rows]
        width = self.max_doc_len if self.score_padding_windows else max(1, max((len(r) for r in rows), default=0))
        out = torch.full((len(rows), width), PAD, dtype=torch.long)
        for i, row in enumerate(rows):
            out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        return out

    def _document_counts(self, docs: list[str]) -> tuple[list[Counter[int]], torch.Tensor]:
        """Per document: term-id counts over the whole text, and its length in terms (Eq. 4's TF and |d|; with
        ``doc_markers`` the two markers count in |d|, as the authors' len(d))."""
        counts = [Counter(self.embedder.vocab.ids(text)) for text in docs]
        extra = len(DOC_MARKERS) if self.doc_markers else 0
        return counts, torch.tensor([float(sum(c.values()) + extra) for c in counts])

    def _with_fields(self, doc_ids: list[str], docs: list[str]) -> list[str]:
        """The documents' text with this entry's ``doc_fields`` beyond the collection's (``data/doc_field.py``)."""
        return docs if self.fields is None else self.fields.texts(doc_ids, docs)
