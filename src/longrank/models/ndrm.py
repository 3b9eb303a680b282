"""NDRM: the Conformer-Kernel model with query term independence (QTI) of Mitra, Hofstätter, Zamani and
Craswell, "Improving Transformer-Kernel Ranking Model Using Conformer and Query Term Independence" (SIGIR
2021), Sec. 3; one model type with ``variant: ndrm1 | ndrm2 | ndrm3``.

Every variant scores a (query, document) pair as a sum over the query's terms, S_{q,d} = Σ_t s_{t,d} (QTI,
Sec. 2), so ``term_scores`` (single-term queries) summed over ``query_terms(query)`` equals ``score_pairs``
and an impact index of precomputed s_{t,d} ranks the whole collection (``build_artifacts``).

- **NDRM1** (Fig. 1b): the document's word embeddings, plus sinusoidal positions, pass through
  ``n_layers`` Conformer layers (``modules/conformer.py``: grouped convolution + separable attention,
  Eq. 2) over up to ``max_doc_len`` = 4,000 terms; a learned per-dimension mix of raw and contextual vectors
  (TK's highway connection). Query terms are **not** contextualised (an embedding lookup and one linear
  map): that is what makes QTI possible. Each query term's row of the cosine interaction matrix goes
  through 10 RBF kernels, kernel activations are summed over windows of ``pool_window`` = 300 terms every
  ``pool_stride`` = 100 (windowed kernel pooling, Hofstätter et al. 2020a), log-saturated, scored per
  window by a small feed-forward net, and the term's score is its best window's. Document score = sum over
  query terms.
- **NDRM2** (Eq. 4): s_t,d = IDF_t · BS(TF) / (BS(TF) + ReLU(w_dlen · BS(|d|) + b_dlen) + ε); w_dlen and b_dlen
  are its only learnable parameters (the embeddings are built for tokenisation only and frozen).
- **NDRM3** (Eq. 3): s_t,d = w1 · BN(s_latent) + w2 · BN(s_explicit) + b, BN a batch norm without its own
  affine parameters (the paper's BN(x) = (x − E[x]) / √Var[x]; w1, w2, b are the affine part).

Choices where the paper is silent, and why (the authors' released code is bmitra-msft/TREC-Deep-Learning-
Quick-Start; read, not copied):
- Kernels (``ndrm_kernels``): mu_i = 1 − 2i/K, i = 0..K−1 (1.0, 0.8, ..., −0.8 for K = 10), all with sigma
  0.1, as the authors' code: an exact-match kernel at 1.0 but, as in TK, with the soft sigma, since
  contextualised document vectors never match a query term exactly.
- Windows: a document of n terms has windows starting at 0, stride, 2·stride, ... until one reaches its end
  (the last may be partly empty), so no term is left out and a document shorter than one window has a
  single window: plain kernel pooling. Windows past a document's end are not scored by default;
  ``score_padding_windows: true`` is the authors' code: every document padded to ``max_doc_len`` and every
  window scored, all-padding ones too, whose features are all log(1e-6), so each term's score is at least that
  window's score (a floor that only documents shorter than ``max_doc_len`` get). ``convolve_padding: true``
  (``modules/conformer.py``) lets the convolution read the padding, as theirs. Full-scale configs: both on.
  Window features are log(sum + 1e-6) (the authors' saturation), scored by Linear(K, hidden) → ReLU →
  dropout → Linear(hidden, 1) and max-pooled over windows (the authors' aggregation).
- Query vectors: one linear map (``query_proj``) after the lookup (the authors' code has it), initialised
  to the identity so that training starts from plain embedding matches. Embeddings of another width than
  ``hidden_dim`` (50d GloVe; word2vec IN ‖ OUT of 2 × 128 is the paper's 256) go through one shared linear
  map (``project``) first, for queries and documents alike.
- Raw/contextual mix: d = a · raw + c · contextual + e with learned scalars a = c = 0.5, e = 0 at the start
  (TK's start; the authors learn the same three numbers).
- BatchScale (Eq. 4: BS(x) = x / (E[x] + ε), ε = 1e-6): E[x] is the running mean of x over every training
  batch seen so far (cumulative, not exponential, as the authors' code: TF and document length are
  statistics of the data, not of the changing model), updated before scaling the batch and used alone at
  evaluation, so a term's score never depends on the other terms or documents it is scored with (QTI).
  TF statistics count real query terms only (not padding slots). Before any training E[x] = 1.
- TF and |d| are counted over the whole document, not only its first ``max_doc_len`` terms (the explicit
  model costs nothing per term, and the authors' code does the same); IDF is ``idf_formula``'s (``ndrm_idf``). w_dlen starts at 1, b_dlen at 0 (BM25-like).
- NDRM3's BN: batch statistics over real query terms in training, running statistics (momentum 0.1: the
  latent scores drift while the model learns) at evaluation; w1 = w2 = 1, b = 0 at the start.
- Text processing (``text_processing``; ``data/words.py``): ``words`` (default) is the word models' tokens, with
  query stop words removed as ``remove_query_stopwords`` says (a query of stop words only keeps them); ``ck`` is
  the authors' code: lower-cased, non-alphanumerics dropped, their stop-word list removed from queries **and**
  documents, Krovetz stems (the full-scale configs). Queries, documents (ids, TF, |d|), the vocabulary and its
  document frequencies, the word2vec vectors (the stage's ``processing``, checked through ``word2vec.json``) and
  so the impact index's terms all go through the one processing. The paper says nothing of either.
- ``doc_markers: true``: <S> and </S> around every document, as the authors' (own zero-initialised rows; a
  document longer than ``max_doc_len`` loses </S>, and both count in |d|). ``idf_formula``: ``smoothed``
  log((N − df + 0.5) / (df + 0.5) + 1) (default) or ``clipped`` max(log((N − df + 0.5) / (df + 0.5)), 0), the
  authors' (full-scale). Unknown document words: masked unless the embedder's ``mask_unknown_words: false``
  (full-scale: kept, as the authors' UNK row); unknown query terms score 0 either way (no impact-index row).
- The authors' forward (each a setting whose default is this project's layout, which the CPU configs' recorded scores
  use; the full-scale configs take the authors'): ``position_layout: interleaved`` adds the positions as their ``PositionalEncoding``
  lays them out (sin and cos interleaved; ``concat``, the default, is [sin | cos]: the same features in other
  columns, ``modules/positions.py``); ``pad_row: unknown`` reads the padding of a document from the trainable
  unknown-word row (their padding id 0 is their UNK row; ``zero``: the fixed zero padding row), which matters where
  the convolution reads the padding (``convolve_padding``); ``words_without_vectors: unknown`` gives every word
  without a pretrained vector the unknown-word row in the latent model (their vocabulary is fastText's words, so a
  rare query word kept in this vocabulary for its IDF is UNK to their embedding; ``own_row``: a row of its own,
  initialised at random), while its term frequency and IDF stay its own; ``unknown_query_words: scored`` scores a
  query word without a row through the unknown-word row (and IDF 0 in the explicit model, as their IDF table lacks
  it) instead of leaving it out (``masked``). tests/test_ndrm_forward.py compares the full-scale settings with a
  re-statement of the authors' forward at identical weights.
- Query terms (``query_terms``): processed as above,
  truncated to ``max_query_len`` = 20, duplicates kept (a repeated term counts twice); out-of-vocabulary
  terms score 0 and are left out. ``query_term_weights: idf`` multiplies each term's score by its IDF.

Impact index: see :mod:`longrank.models.ndrm_impact`. Without one (the training's dev reranks), ``score_pairs`` runs
the Conformer once per distinct document of a job (``modules/kept_documents.py``) where a document's encoding depends
on its text alone (not with ``convolve_padding`` over a batch padded to its longest).
"""

from __future__ import annotations

import torch
from torch import nn

from longrank.data.doc_field import DocumentFields
from longrank.data.words import OOV, PAD, analyzer
from longrank.errors import InputError
from longrank.models.base import Ranker, config_keys, split_config
from longrank.models.modules import kept_documents
from longrank.models.modules.conformer import ConformerLayer
from longrank.models.modules.windowed_kernel_pooling import (  # LOG_EPS and kernel_pooling: NDRM's, re-exported
    LOG_EPS as LOG_EPS,
    kernel_pooling as kernel_pooling,
)
from longrank.models.modules.word_embedder import WordEmbedder, pretrained_rows
from longrank.models.ndrm_inputs import NDRMInputs, check_choices, check_sizes
from longrank.models.ndrm_latent import EncodedDocuments, LatentMatch
from longrank.models.ndrm_impact import impact_scores, read_exact_index, write_impact_index
from longrank.models.ndrm_terms import ExplicitMatch, ndrm_idf, ndrm_kernels, processed_embedder
from longrank.config.schema import schema_default

RERANK_BATCH = schema_default("rerank.batch_size")  # candidates per forward while indexing, as rerank's

KERNEL_BUDGET = 1 << 24  # elements of one [docs, terms, kernels, length] block when scoring many terms


class NDRM(NDRMInputs, LatentMatch, Ranker):
    default_loss = "ranknet"
    config_parts = (WordEmbedder, ConformerLayer, ndrm_kernels)
    parameter_groups = {"embeddings": ("embedder.", "markers."), "scoring": ("window_scorer.", "explicit.", "combine.")}
    idf: torch.Tensor  # a buffer: IDF per vocabulary id, as the explicit match reads it

    def __init__(
        self,
        embedder: WordEmbedder,
        mu: torch.Tensor,
        sigma: torch.Tensor,
        idf: torch.Tensor,
        conformer: dict,
        variant: str = "ndrm1",
        hidden_dim: int = 256,
        n_layers: int = 2,
        n_heads: int = 32,
        max_query_len: int = 20,
        max_doc_len: int = 4000,
        pool_window: int = 300,
        pool_stride: int = 100,
        impact_depth: int | None = None,
        text_processing: str = "words",
        doc_markers: bool = False,
        score_padding_windows: bool = False,
        idf_formula: str = "smoothed",
        position_layout: str = "concat",
        pad_row: str = "zero",
        words_without_vectors: str = "own_row",
        unknown_query_words: str = "masked",
        doc_fields: list[str] | None = None,
    ):
        """``conformer``: the config's ConformerLayer keys (conv_window, conv_groups, ff, dropout, attention,
        convolve_padding; the layer's signature holds their defaults); ``mu``/``sigma`` from ``ndrm_kernels``; ``idf``
        per vocabulary id (``ndrm_idf`` of ``idf_formula``, which ``from_config`` applies). ``text_processing`` must
        be the processing ``embedder``'s vocabulary was built with (``from_config`` builds it so)."""
        super().__init__()
        check_choices(
            variant, text_processing, idf_formula, position_layout, pad_row, words_without_vectors, unknown_query_words
        )
        check_sizes(
            impact_depth,
            hidden_dim=hidden_dim,
            n_layers=n_layers,
            max_query_len=max_query_len,
            max_doc_len=max_doc_len,
            pool_window=pool_window,
            pool_stride=pool_stride,
        )
        self.embedder, self.variant = embedder, variant
        self.max_query_len, self.max_doc_len = max_query_len, max_doc_len
        self.pool_window, self.pool_stride, self.impact_depth = pool_window, pool_stride, impact_depth
        self.text_processing, self.idf_formula = text_processing, idf_formula
        self.doc_markers, self.score_padding_windows = bool(doc_markers), bool(score_padding_windows)
        self.position_layout, self.pad_row = position_layout, pad_row
        self.words_without_vectors, self.unknown_query_words = words_without_vectors, unknown_query_words
        self.score_unknown = unknown_query_words == "scored"
        self._analyze = None if text_processing == "words" else analyzer(text_processing)
        self.latent, self.explicit_match = variant != "ndrm2", variant != "ndrm1"
        self._add_tables(mu, sigma, idf)
        self._impact: dict | None = None
        self.doc_fields, self.fields = doc_fields, None  # ``from_config`` attaches the fields' stores
        self._kept_documents = kept_documents.KeptDocuments()
        self._add_variant_layers(hidden_dim, n_heads, n_layers, conformer, n_kernels=len(mu))

    def _add_tables(self, mu: torch.Tensor, sigma: torch.Tensor, idf: torch.Tensor) -> None:
        """The buffers the scoring reads: each id's embedding row in the latent model, the kernels, the IDF."""
        # the latent model's embedding row of each id (padding and words without vectors -> the unknown-word row,
        # per the settings; ``from_config`` marks the words without vectors, ``use_vector_rows``)
        self.register_buffer("latent_row", torch.arange(len(self.embedder.vocab)), persistent=False)
        if self.pad_row == "unknown":
            self.latent_row[PAD] = OOV
        self.register_buffer("mu", mu, persistent=False)
        self.register_buffer("sigma", sigma, persistent=False)
        if self.score_unknown:  # an unknown query word: IDF 0, as the authors' table lacks it (its TF is then moot)
            idf = idf.clone()
            idf[OOV] = 0.0
        self.register_buffer("idf", idf, persistent=False)

    def _add_variant_layers(
        self, hidden_dim: int, n_heads: int, n_layers: int, conformer: dict, n_kernels: int
    ) -> None:
        """The variant's layers: NDRM1's latent model, NDRM2's explicit match, NDRM3's both and their combination."""
        if self.latent:
            self._add_latent_model(self.embedder.dim, hidden_dim, n_heads, n_layers, conformer, n_kernels=n_kernels)
        else:
            self.embedder.embedding.weight.requires_grad_(False)  # NDRM2 reads token ids only
        if self.explicit_match:
            self.explicit = ExplicitMatch()
        if self.variant == "ndrm3":
            self.normalise = nn.BatchNorm1d(2, affine=False)
            self.combine = nn.Linear(2, 1)
            with torch.no_grad():
                self.combine.weight.fill_(1.0)
                self.combine.bias.zero_()

    @classmethod
    def from_config(cls, params, corpus):
        embedder_keys, conformer_keys, kernel_keys, own = split_config(
            "ndrm", params, WordEmbedder, ConformerLayer, ndrm_kernels, cls.__init__
        )
        defaults = config_keys(cls.__init__)
        processing = own.get("text_processing", defaults["text_processing"])
        embedder = processed_embedder(corpus, processing, embedder_keys)
        idf = ndrm_idf(embedder.vocab, own.get("idf_formula", defaults["idf_formula"]))
        model = cls(embedder, *ndrm_kernels(**kernel_keys), idf, conformer=conformer_keys, **own)
        if model.doc_fields:
            model.fields = DocumentFields(corpus.dir, model.doc_fields, "ndrm: doc_fields")
        if model.words_without_vectors == "unknown":
            source = embedder_keys.get("embeddings", config_keys(WordEmbedder)["embeddings"])
            model.use_vector_rows(pretrained_rows(embedder.vocab, corpus, source))
        return model

    def use_vector_rows(self, has_vector: torch.Tensor) -> None:
        """``words_without_vectors: unknown``: the latent model reads the unknown-word row for every vocabulary id
        whose ``has_vector`` [vocabulary] is false (padding as ``pad_row`` says)."""
        rows = torch.where(has_vector.to(torch.bool), torch.arange(len(has_vector)), torch.tensor(OOV))
        rows[PAD] = OOV if self.pad_row == "unknown" else PAD
        self.latent_row = rows.to(self.latent_row.device)

    @classmethod
    def export_notes(cls, params):
        return [
            "NDRM scores from its weights; the workflow's impact index (fullrank over a whole collection) "
            "is not exported: rerank a first stage's run with it"
        ]

    def encode(self, queries, doc_ids, docs):
        docs = self._with_fields(doc_ids, docs)
        query = self._query_ids(queries)
        batch = {"query": query}
        if self.latent:
            batch["doc"] = self._doc_ids(docs)
        if self.explicit_match:
            counts, batch["dlen"] = self._document_counts(docs)
            batch["tf"] = torch.tensor([[float(c.get(t, 0)) for t in row] for c, row in zip(counts, query.tolist())])
        return batch

    # ---- scoring ----------------------------------------------------------------------------------------
    def _combine(self, latent: torch.Tensor | None, explicit: torch.Tensor | None, mask: torch.Tensor) -> torch.Tensor:
        """Per-term scores of the variant [D, T] from its parts (Eq. 3 for NDRM3; BN over real terms)."""
        if self.variant == "ndrm1":
            assert latent is not None  # NDRM1 scores by the latent match alone
            return latent
        if self.variant == "ndrm2":
            assert explicit is not None  # NDRM2 by the explicit match alone
            return explicit
        assert latent is not None and explicit is not None  # NDRM3 by both
        both = torch.stack([latent, explicit], dim=-1)  # [D, T, 2]
        real = mask.bool()
        normalised = both.new_zeros(both.shape)
        if real.any():
            normalised[real] = self.normalise(both[real])
        return self.combine(normalised).squeeze(-1)

    def _query_mask(self, ids: torch.Tensor) -> torch.Tensor:
        """1 for the query words scored: those of the vocabulary, and unknown ones with ``unknown_query_words:
        scored``."""
        return (ids > (PAD if self.score_unknown else OOV)).float()

    def forward(
        self,
        query: torch.Tensor,
        doc: torch.Tensor | None = None,
        tf: torch.Tensor | None = None,
        dlen: torch.Tensor | None = None,
    ) -> torch.Tensor:
        encoded = None
        if self.latent:
            assert doc is not None  # the latent match reads the documents' ids (``encode`` gives them)
            encoded = self._encode_documents(doc)
        return self._score(query, encoded, tf, dlen)

    def _score(
        self,
        query: torch.Tensor,
        encoded: EncodedDocuments | None,
        tf: torch.Tensor | None,
        dlen: torch.Tensor | None,
    ) -> torch.Tensor:
        """The forward's score from the documents as ``_encode_documents`` gives them (None without latent match)."""
        q_mask = self._query_mask(query)
        latent = self._latent_scores(self._query_vectors(query), encoded) if encoded is not None else None
        explicit = self.explicit(tf, dlen, self.idf[query], q_mask) if self.explicit_match else None
        per_term = self._combine(latent, explicit, q_mask)
        return (per_term * self.embedder.query_weights(query, q_mask)).sum(dim=1)

    @torch.no_grad()
    def _score_terms(self, term_ids: torch.Tensor, docs: list[str]) -> torch.Tensor:
        """s_{t,d} (weighted as in the sum over a query's terms) of ``term_ids`` [T] against ``docs`` -> [D, T].
        Each document is encoded once; terms are scored in blocks that keep the kernel tensor bounded."""
        device = self.device
        term_ids = term_ids.to(device)
        encoded = self._encode_documents(self._doc_ids(docs).to(device)) if self.latent else None
        if self.explicit_match:
            counts, dlen = self._document_counts(docs)
            term_list = term_ids.tolist()
            tf = torch.tensor([[float(c.get(t, 0)) for t in term_list] for c in counts], device=device)
            dlen = dlen.to(device)
        length = encoded[0].shape[1] if encoded is not None else 1
        block = max(1, KERNEL_BUDGET // (len(docs) * len(self.mu) * length))
        out = []
        for start in range(0, len(term_ids), block):
            ids = term_ids[start : start + block]
            mask = self._query_mask(ids)[None, :].expand(len(docs), -1)
            latent = self._latent_scores(self._query_vectors(ids)[None], encoded) if encoded is not None else None
            explicit = (
                self.explicit(tf[:, start : start + block], dlen, self.idf[ids][None], mask)
                if self.explicit_match
                else None
            )
            out.append(self._combine(latent, explicit, mask) * self.embedder.query_weights(ids[None], mask))
        return torch.cat(out, dim=1)

    def term_scores(
        self,
        terms: list[str],
        doc_ids: list[str],
        docs: list[str],
        batch_size: int = schema_default("rerank.batch_size"),
    ) -> torch.Tensor:
        """QTI: s_{t,d} of each single-term query t against each document, in eval mode -> [n_terms, n_docs]
        (CPU float32). For any query, ``score_pairs`` = the sum of these rows over ``query_terms(query)``.
        ``doc_ids`` name ``docs`` (read only for ``doc_fields`` beyond the collection's text)."""
        docs = self._with_fields(doc_ids, docs)
        was_training = self.training
        self.eval()
        try:
            ids = torch.tensor([self.embedder.vocab.index.get(t, OOV) for t in terms], dtype=torch.long)
            if not len(docs):
                return torch.zeros(len(terms), 0)
            if not len(terms):
                return torch.zeros(0, len(docs))
            blocks = [
                self._score_terms(ids, docs[i : i + batch_size]).float().cpu() for i in range(0, len(docs), batch_size)
            ]
            return torch.cat(blocks, dim=0).T.contiguous()
        finally:
            self.train(was_training)

    def score_pairs(self, queries, doc_ids, docs):
        """Scores from the impact index where one is attached, else the forward's with each distinct document
        through the Conformer once per job (``kept_documents``; the training's dev reranks)."""
        if self._impact is not None:
            scores = impact_scores(self._impact, self.query_terms, queries, doc_ids)
            if scores is not None:
                return scores.to(self.device)
        if not self._encodes_documents_alone() or not kept_documents.applies(self):
            return super().score_pairs(queries, doc_ids, docs)
        batch = {k: v.to(self.device) for k, v in self.encode(queries, doc_ids, docs).items()}
        texts = self._with_fields(doc_ids, docs)
        vectors, mask = kept_documents.padded(
            self._kept_documents.get(self, texts, self._encode_texts), batch["doc"].shape[1]
        )
        encoded = (vectors, mask, (batch["doc"] != PAD).sum(dim=1))
        return self._score(batch["query"], encoded, batch.get("tf"), batch.get("dlen"))

    def _encodes_documents_alone(self) -> bool:
        """Whether a document's encoding depends on its text alone: the convolution zeroes the padding, or reads it
        only where every row is padded to ``max_doc_len`` (``score_padding_windows``), not to its batch's longest."""
        if not self.latent:
            return False
        return self.score_padding_windows or not any(layer.convolve_padding for layer in self.encoder)

    def _encode_texts(self, texts: list[str]) -> list[tuple[torch.Tensor, ...]]:
        """``_encode_documents`` of documents' texts (their fields added), each cut to its own length."""
        vectors, mask, lengths = self._encode_documents(self._doc_ids(texts).to(self.device))
        return kept_documents.trimmed_rows((vectors, mask), lengths.tolist())

    # ---- the impact index (fold artifact; models/ndrm_impact.py) ----------------------------------------
    def build_artifacts(self, scope, corpus, doc_ids, out_dir, *, batch_size=RERANK_BATCH):
        """Write the impact index of this (fold-trained) model: ``impact.npz`` (scipy.sparse CSR float32,
        [n_terms, n_docs], row t = s_{t,d} − floor_t for the term's top ``impact_depth`` documents, all if
        null) and ``impact.json`` (format, terms, doc_ids, impact_depth, term_floors, build_seconds, and every
        query's ``query_terms``). The index covers **every document of the collection** (``corpus.docs``),
        whatever ``doc_ids`` the artifacts stage passes (the candidates' documents): a fullrank first stage
        retrieves from all of them. The terms are the processed terms of all of ``corpus.queries`` (no labels)."""
        if scope != "fold":
            raise InputError(f"NDRM declares no {scope!r} artifacts to build (its impact index is per fold)")
        write_impact_index(self, corpus, out_dir, batch_size)

    def attach_artifacts(self, directory):
        """Reranking with the fold's impact index attached: an unpruned index holds every s_{t,d} of the
        collection, so ``score_pairs`` reads them (Σ_t row_t[d] + floor_t) instead of running the Conformer; a
        pruned one cannot give exact scores, and the model scores from its weights."""
        self._impact = read_exact_index(directory)
