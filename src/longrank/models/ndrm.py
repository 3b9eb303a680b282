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
- Query terms (``query_terms``): processed as above,
  truncated to ``max_query_len`` = 20, duplicates kept (a repeated term counts twice); out-of-vocabulary
  terms score 0 and are left out. ``query_term_weights: idf`` multiplies each term's score by its IDF.

Impact index (the ``impact_index`` artifact, scope ``fold``): s_{t,d} of the fold's trained model for every
term of every query in the collection (no labels) against **every document of the collection**. Latent
scores can be negative, and an inverted index treats a missing entry as 0; so each term's row stores
s_{t,d} − floor_t, floor_t = min over the collection's documents, which is ≥ 0 and 0 for the term's worst
document: a query's sum of rows is its model score minus Σ floor_t, a constant per query (same ranking),
and a document a pruned row left out counts as the term's worst. ``impact.json``'s ``term_floors`` gives the
floors back: Σ_t (row_t[d] + floor_t) is the model's score exactly (unpruned). ``impact_depth`` keeps each
term's top documents only (null: all). When an unpruned index is attached (reranking), ``score_pairs``
reads scores from it instead of re-encoding documents: the same numbers, without the Conformer.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm
from torch import nn
from torch.nn import functional as F

from longrank.data import word2vec as word2vec_stage
from longrank.data.words import OOV, PAD, TEXT_PROCESSING, Vocabulary, analyzer
from longrank.data.words import query_terms as split_query
from longrank.io import InputError, read_tsv_dict, write_json
from longrank.models.base import Ranker, config_keys, split_config
from longrank.models.modules.conformer import ConformerLayer
from longrank.models.modules.positions import sinusoidal_positions
from longrank.models.modules.word_embedder import WORD2VEC, WordEmbedder, word2vec_path

VARIANTS = ("ndrm1", "ndrm2", "ndrm3")
IMPACT_FORMAT = "longrank-impact/1"
LOG_EPS = 1e-6  # window features: log(kernel sum + 1e-6)
SCALE_EPS = 1e-6  # Eq. 4's ε, in BatchScale and in the denominator
KERNEL_BUDGET = 1 << 24  # elements of one [docs, terms, kernels, length] block when scoring many terms
IDF_FORMULAS = ("smoothed", "clipped")
DOC_MARKERS = ("<S>", "</S>")  # the authors' document start and end tokens (ids past the vocabulary's, own rows)


def ndrm_idf(vocab: Vocabulary, formula: str = "smoothed") -> torch.Tensor:
    """NDRM2's IDF per vocabulary id: ``smoothed`` log((N − df + 0.5) / (df + 0.5) + 1) (``Vocabulary.idf``, the
    other kernel models' and BM25's, never negative) or ``clipped`` max(log((N − df + 0.5) / (df + 0.5)), 0), the
    authors' code's (0 for a term in half the documents or more); 0 for padding either way."""
    if formula not in IDF_FORMULAS:
        raise InputError(f"idf_formula: {formula!r} is not one of {list(IDF_FORMULAS)}")
    if formula == "smoothed":
        return vocab.idf()
    df = torch.tensor(vocab.doc_freq, dtype=torch.float64)
    idf = torch.clamp(torch.log((vocab.num_docs - df + 0.5) / (df + 0.5)), min=0.0).float()
    idf[PAD] = 0.0
    return idf


def ndrm_kernels(n_kernels: int = 10, sigma: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """NDRM's RBF kernels: mu_i = 1 − 2i/K (i = 0..K−1), every sigma ``sigma`` (see the module docstring).
    The keyword defaults are the config defaults (the paper's 10 kernels)."""
    if n_kernels < 1:
        raise InputError(f"n_kernels: must be a positive integer, got {n_kernels}")
    return torch.tensor([1.0 - 2.0 * i / n_kernels for i in range(n_kernels)]), torch.full((n_kernels,), float(sigma))


def term_kernels(cosine: torch.Tensor, d_mask: torch.Tensor, mu: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """RBF kernels of each query term's row: cosine [D, T, L], document mask [D, L] -> [D, T, K, L], exactly 0 at
    padding. The [D, T, K, L] block is the largest tensor of NDRM1 (and of building an impact index), so padding is
    given a cosine no kernel reaches (exp underflows to 0) rather than masked in another pass over it, and
    without autograd the block is computed in place (2x faster on CPU)."""
    far = 2.0 + 40.0 * float(sigma.max())  # exp(-(40 sigma)^2 / (2 sigma^2)) = exp(-800) = 0
    x = cosine.masked_fill(d_mask[:, None, :] == 0, far)[:, :, None, :] - mu[:, None]
    scale = -0.5 / sigma[:, None] ** 2
    if x.requires_grad:
        return torch.exp(x.square() * scale)
    return x.square_().mul_(scale).exp_()


# ---- windowed kernel pooling ------------------------------------------------------------------------------


def window_count(lengths: torch.Tensor, window: int, stride: int) -> torch.Tensor:
    """Windows of a document of ``lengths`` terms: starts 0, stride, ... until one reaches the end; >= 1."""
    extra = torch.clamp(lengths - window, min=0)
    return 1 + torch.div(extra + stride - 1, stride, rounding_mode="floor")


def aligned_length(length: int, window: int, stride: int) -> int:
    """The length the windows of a ``length``-term sequence span: the last one ends there (>= length)."""
    return (int(window_count(torch.tensor(length), window, stride)) - 1) * stride + window


def kernel_pooling(kernels: torch.Tensor) -> torch.Tensor:
    """Plain kernel pooling of one query term's row: [..., K, L] activations -> [..., K] log(Σ_L + 1e-6)."""
    return torch.log(kernels.sum(dim=-1) + LOG_EPS)


def windowed_kernel_pooling(
    kernels: torch.Tensor, lengths: torch.Tensor, window: int, stride: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Kernel pooling per window: [..., K, L] activations (zero at padding) and document lengths (broadcastable
    to the leading dims) -> features [..., J, K] = log(window sum + 1e-6) and valid [..., J] (windows that start
    inside the document; see ``window_count``). A document shorter than ``window`` has one window whose
    features are ``kernel_pooling``'s. Windows are summed directly (no running sums: no cancellation noise)."""
    length = kernels.shape[-1]
    n_windows = 1 + max(0, -(-(length - window) // stride))
    missing = aligned_length(length, window, stride) - length
    padded = F.pad(kernels, (0, missing)) if missing else kernels  # NDRM pads the (K times smaller) cosines instead
    sums = padded.unfold(-1, window, stride).sum(dim=-1)  # [..., K, J]
    valid = torch.arange(n_windows, device=kernels.device) < window_count(lengths, window, stride)[..., None]
    return torch.log(sums + LOG_EPS).transpose(-1, -2), valid


# ---- Eq. 4 ------------------------------------------------------------------------------------------------


class BatchScale(nn.Module):
    """BS(x) = x / (E[x] + ε) (Eq. 4), E[x] the cumulative mean over training batches (module docstring)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.ones(()))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.training:
            values = x.detach() if mask is None else x.detach()[mask.bool()]
            if values.numel():
                total = self.count + values.numel()
                self.mean.copy_((self.mean.double() * self.count + values.double().sum()) / total)
                self.count.copy_(total)
        return x / (self.mean + SCALE_EPS)


class ExplicitMatch(nn.Module):
    """NDRM2's term score (Eq. 4); w_dlen and b_dlen are its only parameters."""

    def __init__(self):
        super().__init__()
        self.scale_tf, self.scale_dlen = BatchScale(), BatchScale()
        self.w_dlen = nn.Parameter(torch.tensor(1.0))
        self.b_dlen = nn.Parameter(torch.tensor(0.0))

    def forward(
        self, tf: torch.Tensor, dlen: torch.Tensor, idf: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """tf [D, T], dlen [D], idf [D or 1, T], mask [D, T] (real query terms, for the TF statistics) -> [D, T]."""
        tf = self.scale_tf(tf, mask)
        saturation = torch.relu(self.w_dlen * self.scale_dlen(dlen) + self.b_dlen)[:, None]
        return idf * tf / (tf + saturation + SCALE_EPS)


class NDRM(Ranker):
    default_loss = "ranknet"
    config_parts = (WordEmbedder, ConformerLayer, ndrm_kernels)
    parameter_groups = {"embeddings": ("embedder.", "markers."), "scoring": ("window_scorer.", "explicit.", "combine.")}

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
    ):
        """``conformer``: the config's ConformerLayer keys (conv_window, conv_groups, ff, dropout, attention,
        convolve_padding; the layer's signature holds their defaults); ``mu``/``sigma`` from ``ndrm_kernels``; ``idf``
        per vocabulary id (``ndrm_idf`` of ``idf_formula``, which ``from_config`` applies). ``text_processing`` must
        be the processing ``embedder``'s vocabulary was built with (``from_config`` builds it so)."""
        super().__init__()
        if variant not in VARIANTS:
            raise InputError(f"variant: {variant!r} is not one of {list(VARIANTS)}")
        if text_processing not in TEXT_PROCESSING:
            raise InputError(f"text_processing: {text_processing!r} is not one of {list(TEXT_PROCESSING)}")
        if idf_formula not in IDF_FORMULAS:
            raise InputError(f"idf_formula: {idf_formula!r} is not one of {list(IDF_FORMULAS)}")
        for key, value in (
            ("hidden_dim", hidden_dim),
            ("n_layers", n_layers),
            ("max_query_len", max_query_len),
            ("max_doc_len", max_doc_len),
            ("pool_window", pool_window),
            ("pool_stride", pool_stride),
        ):
            if int(value) < 1 and not (key == "n_layers" and value == 0):
                raise InputError(f"{key}: must be a positive integer, got {value!r}")
        if impact_depth is not None and int(impact_depth) < 1:
            raise InputError(
                f"impact_depth: must be a positive integer or null (keep every document), got {impact_depth!r}"
            )
        self.embedder, self.variant = embedder, variant
        self.max_query_len, self.max_doc_len = max_query_len, max_doc_len
        self.pool_window, self.pool_stride, self.impact_depth = pool_window, pool_stride, impact_depth
        self.text_processing, self.idf_formula = text_processing, idf_formula
        self.doc_markers, self.score_padding_windows = bool(doc_markers), bool(score_padding_windows)
        self._analyze = None if text_processing == "words" else analyzer(text_processing)
        self.latent, self.explicit_match = variant != "ndrm2", variant != "ndrm1"
        self.register_buffer("mu", mu, persistent=False)
        self.register_buffer("sigma", sigma, persistent=False)
        self.register_buffer("idf", idf, persistent=False)
        self._impact: dict | None = None
        if self.latent:
            layer_keys = {**config_keys(ConformerLayer), **conformer}
            dim = embedder.dim
            self.project = nn.Identity() if dim == hidden_dim else nn.Linear(dim, hidden_dim)
            self.query_proj = nn.Linear(hidden_dim, hidden_dim)
            nn.init.eye_(self.query_proj.weight)
            nn.init.zeros_(self.query_proj.bias)
            self.position_dropout = nn.Dropout(layer_keys["dropout"])
            if self.doc_markers:  # the authors' <S>, </S> rows: zeros at the start, trained with the embeddings
                self.markers = nn.Embedding(len(DOC_MARKERS), dim)
                nn.init.zeros_(self.markers.weight)
            self.encoder = nn.ModuleList(ConformerLayer(hidden_dim, n_heads, **conformer) for _ in range(n_layers))
            self.mix = nn.Linear(2, 1)
            with torch.no_grad():
                self.mix.weight.fill_(0.5)
                self.mix.bias.zero_()
            self.window_scorer = nn.Sequential(
                nn.Linear(len(mu), hidden_dim), nn.ReLU(), nn.Dropout(layer_keys["dropout"]), nn.Linear(hidden_dim, 1)
            )
        else:
            embedder.embedding.weight.requires_grad_(False)  # NDRM2 reads token ids only
        if self.explicit_match:
            self.explicit = ExplicitMatch()
        if variant == "ndrm3":
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
        if processing == "words":
            embedder = WordEmbedder.for_corpus(
                corpus, **embedder_keys
            )  # resolves ``embeddings: word2vec`` (the paper's)
        else:
            # the vocabulary is read with the filters already: not cut again (a cut would drop the query words kept
            # beyond it, whose document frequency is not 0)
            keys = {**embedder_keys, "min_doc_freq": 1, "max_vocabulary": None}
            if keys.get("embeddings") == WORD2VEC:
                keys["embeddings"] = str(word2vec_path(corpus.dir))
            embedder = WordEmbedder(cls.processed_vocabulary(corpus, processing, embedder_keys), **keys)
        idf = ndrm_idf(embedder.vocab, own.get("idf_formula", defaults["idf_formula"]))
        return cls(embedder, *ndrm_kernels(**kernel_keys), idf, conformer=conformer_keys, **own)

    @staticmethod
    def processed_vocabulary(corpus, processing: str, embedder_keys: dict) -> Vocabulary:
        """The vocabulary of ``processing``'s terms (stems, for ``ck``), its ``analyze`` that processing. With
        ``embeddings: word2vec`` it is read from the word2vec stage's document frequencies, which must have been
        counted with the same processing (``word2vec.json`` says which); otherwise it is counted here over the
        collection's documents (a pass over them: fine for a small collection, use word2vec on a large one)."""
        analyze = analyzer(processing)
        queries = read_tsv_dict(Path(corpus.dir) / "queries.tsv").values()
        limits = (embedder_keys.get("min_doc_freq", 1), embedder_keys.get("max_vocabulary"))
        if embedder_keys.get("embeddings") != WORD2VEC:
            return Vocabulary.build(corpus.docs.values(), queries, *limits, analyze=analyze)
        directory = word2vec_path(corpus.dir).parent
        meta_path = directory / word2vec_stage.META_FILE
        meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
        if meta.get("processing", "words") != processing:
            raise InputError(
                f"ndrm: text_processing: {processing} needs word vectors of {processing} terms, but "
                f"{directory / word2vec_stage.FILE_NAME} was trained on {meta.get('processing', 'words')!r} terms "
                f"({meta_path}); set the config's word2vec.processing: {processing} and rerun the word2vec stage"
            )
        return Vocabulary.load(
            directory / word2vec_stage.DOC_FREQ_FILE, corpus.stats["num_docs"], queries, *limits, analyze=analyze
        )

    @classmethod
    def artifacts(cls, params):
        return {"impact_index": "fold"}

    # ---- inputs -----------------------------------------------------------------------------------------
    def _query_words(self, text: str) -> list[str]:
        """A query's processed words, out-of-vocabulary ones included, truncated to ``max_query_len``: ``words``
        processing is the embedder's (stop words as ``remove_query_stopwords`` says), ``ck`` the authors' (their
        stop words always removed; a query of stop words only has no terms, as theirs)."""
        if self._analyze is None:
            return split_query(text, self.embedder.remove_query_stopwords)[: self.max_query_len]
        return self._analyze(text)[: self.max_query_len]

    def query_terms(self, text: str) -> list[str]:
        """The terms the model scores ``text`` by (module docstring): Σ term_scores over them = the score."""
        return [w for w in self._query_words(text) if self.embedder.vocab.index.get(w, OOV) > OOV]

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

    def _document_counts(self, docs: list[str]) -> tuple[list[Counter], torch.Tensor]:
        """Per document: term-id counts over the whole text, and its length in terms (Eq. 4's TF and |d|; with
        ``doc_markers`` the two markers count in |d|, as the authors' len(d))."""
        counts = [Counter(self.embedder.vocab.ids(text)) for text in docs]
        extra = len(DOC_MARKERS) if self.doc_markers else 0
        return counts, torch.tensor([float(sum(c.values()) + extra) for c in counts])

    def encode(self, queries, doc_ids, docs):
        query = self._query_ids(queries)
        batch = {"query": query}
        if self.latent:
            batch["doc"] = self._doc_ids(docs)
        if self.explicit_match:
            counts, batch["dlen"] = self._document_counts(docs)
            batch["tf"] = torch.tensor([[float(c.get(t, 0)) for t in row] for c, row in zip(counts, query.tolist())])
        return batch

    # ---- scoring ----------------------------------------------------------------------------------------
    def _encode_documents(self, doc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """doc ids [D, L] -> unit document vectors [D, L, H] (zero at padding/OOV), mask [D, L], lengths [D]."""
        if self.doc_markers:
            marker = doc >= len(self.embedder.vocab)
            vectors, mask = self.embedder(doc.masked_fill(marker, PAD))
            vectors = torch.where(
                marker[..., None], self.markers((doc - len(self.embedder.vocab)).clamp(min=0)), vectors
            )
            mask = mask + marker.to(mask.dtype)
        else:
            vectors, mask = self.embedder(doc)
        raw = self.project(vectors)
        contextual = self.position_dropout(raw + sinusoidal_positions(doc.shape[1], raw.shape[-1], raw.device))
        for layer in self.encoder:
            contextual = layer(contextual, mask)
        a, c = self.mix.weight[0]  # the mix as a Linear(2, 1) over [raw, contextual], without stacking the two
        mixed = a * raw + c * contextual + self.mix.bias
        return F.normalize(mixed, dim=-1, eps=1e-8) * mask[..., None], mask, (doc != PAD).sum(dim=1)

    def _query_vectors(self, ids: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.query_proj(self.project(self.embedder.embedding(ids))), dim=-1, eps=1e-8)

    def _latent_scores(self, q: torch.Tensor, docs: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """Unit query vectors [D or 1, T, H] against encoded documents -> per-term scores [D, T] (best window)."""
        d, d_mask, lengths = docs
        cosine = q @ d.transpose(1, 2)  # [D, T, L], padded (as padding) to where the last window ends
        missing = aligned_length(cosine.shape[-1], self.pool_window, self.pool_stride) - cosine.shape[-1]
        cosine, d_mask = F.pad(cosine, (0, missing)), F.pad(d_mask, (0, missing))
        kernels = term_kernels(cosine, d_mask, self.mu, self.sigma)  # [D, T, K, L']
        if self.score_padding_windows:  # the authors': every window of the padded length, all-padding ones too
            lengths = torch.full_like(lengths, kernels.shape[-1])
        features, valid = windowed_kernel_pooling(kernels, lengths[:, None], self.pool_window, self.pool_stride)
        window_scores = self.window_scorer(features).squeeze(-1)  # [D, T, J]
        return window_scores.masked_fill(~valid, float("-inf")).amax(dim=-1)

    def _combine(self, latent: torch.Tensor | None, explicit: torch.Tensor | None, mask: torch.Tensor) -> torch.Tensor:
        """Per-term scores of the variant [D, T] from its parts (Eq. 3 for NDRM3; BN over real terms)."""
        if self.variant == "ndrm1":
            return latent
        if self.variant == "ndrm2":
            return explicit
        both = torch.stack([latent, explicit], dim=-1)  # [D, T, 2]
        real = mask.bool()
        normalised = both.new_zeros(both.shape)
        if real.any():
            normalised[real] = self.normalise(both[real])
        return self.combine(normalised).squeeze(-1)

    def forward(
        self,
        query: torch.Tensor,
        doc: torch.Tensor | None = None,
        tf: torch.Tensor | None = None,
        dlen: torch.Tensor | None = None,
    ) -> torch.Tensor:
        q_mask = (query > OOV).float()
        latent = self._latent_scores(self._query_vectors(query), self._encode_documents(doc)) if self.latent else None
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
            ids = term_ids.tolist()
            tf = torch.tensor([[float(c.get(t, 0)) for t in ids] for c in counts], device=device)
            dlen = dlen.to(device)
        length = encoded[0].shape[1] if encoded is not None else 1
        block = max(1, KERNEL_BUDGET // (len(docs) * len(self.mu) * length))
        out = []
        for start in range(0, len(term_ids), block):
            ids = term_ids[start : start + block]
            mask = (ids > OOV).float()[None, :].expand(len(docs), -1)
            latent = self._latent_scores(self._query_vectors(ids)[None], encoded) if self.latent else None
            explicit = (
                self.explicit(tf[:, start : start + block], dlen, self.idf[ids][None], mask)
                if self.explicit_match
                else None
            )
            out.append(self._combine(latent, explicit, mask) * self.embedder.query_weights(ids[None], mask))
        return torch.cat(out, dim=1)

    def term_scores(self, terms: list[str], doc_ids: list[str], docs: list[str], batch_size: int = 32) -> torch.Tensor:
        """QTI: s_{t,d} of each single-term query t against each document, in eval mode -> [n_terms, n_docs]
        (CPU float32). For any query, ``score_pairs`` = the sum of these rows over ``query_terms(query)``.
        ``doc_ids`` name ``docs`` (unused: scores come from the text)."""
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
        if self._impact is not None:
            scores = self._impact_scores(queries, doc_ids)
            if scores is not None:
                return scores.to(self.device)
        return super().score_pairs(queries, doc_ids, docs)

    # ---- the impact index (fold artifact) ---------------------------------------------------------------
    def build_artifacts(self, scope, corpus, doc_ids, out_dir, *, batch_size=32):
        """Write the impact index of this (fold-trained) model: ``impact.npz`` (scipy.sparse CSR float32,
        [n_terms, n_docs], row t = s_{t,d} − floor_t for the term's top ``impact_depth`` documents, all if
        null) and ``impact.json`` (format, terms, doc_ids, impact_depth, term_floors, build_seconds, and every
        query's ``query_terms``). The index covers **every document of the collection** (``corpus.docs``),
        whatever ``doc_ids`` the artifacts stage passes (the candidates' documents): a fullrank first stage
        retrieves from all of them. The terms are the processed terms of all of ``corpus.queries`` (no labels)."""
        if scope != "fold":
            raise InputError(f"NDRM declares no {scope!r} artifacts to build (its impact index is per fold)")
        from scipy import sparse

        started = time.perf_counter()
        all_docs = sorted(corpus.docs)
        per_query = {qid: self.query_terms(text) for qid, text in sorted(corpus.queries.items())}
        terms = sorted({t for ts in per_query.values() for t in ts})
        values, columns, floors = self._impact_rows(terms, [corpus.docs[d] for d in all_docs], batch_size)
        shifted = (values.astype(np.float64) - floors[:, None]).astype(np.float32)
        keep = shifted > 0  # an entry at its term's floor is what a missing entry means
        rows = np.broadcast_to(np.arange(len(terms))[:, None], shifted.shape)
        matrix = sparse.csr_matrix(
            (shifted[keep], (rows[keep], columns[keep])), shape=(len(terms), len(all_docs)), dtype=np.float32
        )
        sparse.save_npz(Path(out_dir) / "impact.npz", matrix)
        write_json(
            Path(out_dir) / "impact.json",
            {
                "format": IMPACT_FORMAT,
                "terms": terms,
                "doc_ids": all_docs,
                "impact_depth": self.impact_depth,
                "term_floors": [float(f) for f in floors],
                "build_seconds": time.perf_counter() - started,
                "query_terms": per_query,
            },
        )

    def _impact_rows(
        self, terms: list[str], docs: list[str], batch_size: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Stream the collection in batches: each term's kept scores [T, k] with their document columns, and
        each term's minimum over all documents [T] (float64)."""
        n_terms = len(terms)
        floors = np.full(n_terms, np.inf)
        values = [np.zeros((n_terms, 0), dtype=np.float32)]
        columns = [np.zeros((n_terms, 0), dtype=np.int64)]
        for start in tqdm(
            range(0, len(docs), batch_size), desc=f"impact index ({n_terms} terms)", unit="batch", mininterval=5
        ):
            scores = self.term_scores(terms, [], docs[start : start + batch_size], batch_size).numpy()  # [T, D]
            floors = np.minimum(floors, scores.min(axis=1, initial=np.inf))
            values.append(scores)
            columns.append(np.broadcast_to(np.arange(start, start + scores.shape[1]), scores.shape))
            if self.impact_depth is not None:  # keep at most depth + one batch per term in memory
                kept, where = np.concatenate(values, axis=1), np.concatenate(columns, axis=1)
                # highest first, earlier documents first among ties (a stable sort): the same for any batch size
                order = np.argsort(-kept, axis=1, kind="stable")[:, : self.impact_depth]
                values, columns = [np.take_along_axis(kept, order, axis=1)], [np.take_along_axis(where, order, axis=1)]
        return (
            np.concatenate(values, axis=1),
            np.concatenate(columns, axis=1),
            np.where(np.isfinite(floors), floors, 0.0),
        )

    def attach_artifacts(self, directory):
        """Reranking with the fold's impact index attached: an unpruned index holds every s_{t,d} of the
        collection, so ``score_pairs`` reads them (Σ_t row_t[d] + floor_t) instead of running the Conformer; a
        pruned one cannot give exact scores, and the model scores from its weights."""
        directory = Path(directory)
        try:
            meta = json.loads((directory / "impact.json").read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise InputError(
                f"{directory} holds no readable NDRM impact index (impact.json: {err}); rebuild the artifacts"
            ) from None
        if meta.get("format") != IMPACT_FORMAT:
            raise InputError(f"{directory / 'impact.json'}: format {meta.get('format')!r}, expected {IMPACT_FORMAT!r}")
        if meta["impact_depth"] is not None:
            self._impact = None
            return
        from scipy import sparse

        self._impact = {
            "terms": {t: i for i, t in enumerate(meta["terms"])},
            "docs": {d: j for j, d in enumerate(meta["doc_ids"])},
            "floors": np.asarray(meta["term_floors"], dtype=np.float64),
            "matrix": sparse.load_npz(directory / "impact.npz").tocsr(),
        }

    def _impact_scores(self, queries: list[str], doc_ids: list[str]) -> torch.Tensor | None:
        """Σ over the query's terms of (stored entry + floor) per pair, or None if a term or document is not indexed."""
        index = self._impact
        rows, columns, pairs = [], [], []
        for i, (query, doc_id) in enumerate(zip(queries, doc_ids)):
            column = index["docs"].get(doc_id)
            term_rows = [index["terms"].get(t) for t in self.query_terms(query)]
            if column is None or None in term_rows:
                return None
            rows += term_rows
            columns += [column] * len(term_rows)
            pairs += [i] * len(term_rows)
        values = (
            np.asarray(index["matrix"][rows, columns], dtype=np.float64).ravel() + index["floors"][rows]
            if rows
            else np.zeros(0)
        )
        return torch.from_numpy(
            np.bincount(np.asarray(pairs, dtype=np.int64), weights=values, minlength=len(queries)).astype(np.float32)
        )
