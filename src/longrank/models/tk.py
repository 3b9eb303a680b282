"""TK: Hofstätter, Zlabinger and Hanbury, "Interpretable & Time-Budget-Constrained Contextualization for
Re-Ranking" (ECAI 2020); the Transformer baseline of the TKL paper's Table 1 (max document length 200).

Word embeddings (GloVe, trainable) are contextualised by a small Transformer; a learned scalar mixes raw and
contextual vectors (``mix * raw + (1 - mix) * contextual``, initialised 0.5; the TKL paper's "highway
connection"), and the mixed vectors are matched by kernel pooling: cosine similarities, 11 RBF kernels,
per-query-term saturation, query terms summed, kernel weights to the score.

Choices, stated, with the source each default follows (the official code is matchmaker's
``models/published/ecai20_tk.py``):
- Attention: post-norm Transformer encoder layers (ReLU feed-forward, as ``nn.TransformerEncoderLayer``, on
  ``scaled_dot_product_attention``) with ``n_heads`` heads that split the embedding width, so 50d GloVe
  gives **10 heads of 5 dimensions** (300d GloVe: 10 of 30); FF width 300; dropout 0 (official code).
- Positions (official code): sinusoids added to the Transformer's input only (not to the raw half of the
  mix); query tokens take positions 0, 1, ..., document tokens ``doc_position_offset`` = 500, 501, ...
  ``positions: learned`` makes them trainable (TKL's choice); ``doc_position_offset: 0`` shares them.
  The sinusoids' frequencies (``sinusoids``, ``modules/positions.py``; the paper gives none): ``project``
  (default, 10000^(-2i/d)) or ``official``, matchmaker's table (timescales from 1 to exactly 10^4,
  10000^(-i/(d/2-1))); at the same weights the two give other scores (measured: TK scores move by
  ~1.8 at 50d, ~0.5 at 300d). The full-scale configs use ``official``.
- Kernels: mu = 1, 0.9, 0.7, ..., -0.9 with sigma 0.1 for *every* kernel (``exact_sigma: 0.1``): the TKL paper
  states "11 kernels from -1 to +1 and standard deviation of 0.1", and after contextualisation the same word
  in two places no longer has cosine exactly 1, so KNRM's sigma = 0.001 exact-match kernel would rarely fire.
- Pooling: log-saturated kernel sums per query term, summed over query terms, one linear layer to the score
  (the official code's structure). ``saturation`` picks the log's form (the paper states a log-sum, KNRM's, and
  no scale): ``knrm`` (default; KNRM's code, this project's choice) ``log(max(sum_k, 1e-10)) * 0.01`` and a linear
  layer with a bias; ``official``, the official ECAI code's ``log(max(sum_k * alpha_k, 1e-10))`` with a learned
  per-kernel scale ``alpha_k`` (initialised 1, from TK-Sparse; the clamp after the scale), no 0.01 and a linear
  layer without bias (the code "improves on the published paper version"). Both mask alike: document padding
  before the sum over document tokens, query padding after the log. ``alpha_k`` learns at ``train.scoring_lr``.
  Where the clamp does not bind, the two rank one query's documents alike at matching weights: log alpha_k
  adds |q| w_k log alpha_k to every document's score, the 0.01 rescales w_k and the bias shifts all; they
  differ in training (w_k's gradient scale; under a pairwise loss alpha_k gets a gradient only through the clamp).
  ``length_norm: true`` adds a second feature set, kernel mass per document token (off by default: it invites a document-length shortcut).
- ``exact_match: true`` adds this project's exact-match channel (``modules/exact_match.py``; in neither paper): the
  IDF-weighted log term frequency of each query word among the document's read tokens, with one learned weight.
- Query terms and unknown words: see ``modules/word_embedder.py`` (``remove_query_stopwords``, ``query_term_weights``,
  ``mask_unknown_words``: OOV tokens masked like padding by default, this project's choice; the official code
  keeps them as tokens, which ``mask_unknown_words: false`` and the full-scale configs do).
- Learning rates: ``train.scoring_lr`` reaches ``dense`` (the official code gives its kernel weights 10x
  the Transformer's rate), ``train.embedding_lr`` the word embeddings.
- Reranking (``score_pairs``) contextualises each distinct document once per job (``modules/kept_documents.py``):
  the scores are the forward's to fp32's rounding (in the default run 6 of TK's 7,900 scores moved in the 8th
  significant digit, no rank).
"""

from __future__ import annotations

import torch
from torch import nn

from longrank.data.words import PAD
from longrank.errors import InputError
from longrank.models.base import Ranker, config_keys, split_config
from longrank.models.modules import kept_documents
from longrank.models.modules.contextualizer import Contextualizer
from longrank.models.modules.exact_match import ExactMatch
from longrank.models.modules.kernel_pooling import cosine_matrix, rbf_kernels, tk_kernels
from longrank.models.modules.word_embedder import WordEmbedder


SATURATIONS = ("knrm", "official")
MIN_SUM = 1e-10  # KNRM's clamp under the log


class TK(Ranker):
    default_loss = "pairwise_hinge"
    config_parts = (WordEmbedder, Contextualizer, tk_kernels)
    parameter_groups = {"embeddings": ("embedder.",), "scoring": ("dense.", "kernel_alpha", "exact_match.")}
    mu: torch.Tensor  # buffers: the kernels' centres and widths
    sigma: torch.Tensor

    def __init__(
        self,
        embedder: WordEmbedder,
        contextualizer: Contextualizer,
        mu: torch.Tensor,
        sigma: torch.Tensor,
        max_query_len: int = 30,
        max_doc_len: int = 200,
        length_norm: bool = False,
        saturation: str = "knrm",
        exact_match: bool = False,
    ):
        super().__init__()
        if saturation not in SATURATIONS:
            raise InputError(f"saturation: {saturation!r} is not one of {list(SATURATIONS)}")
        self.saturation = saturation
        self.embedder, self.contextualizer = embedder, contextualizer
        self.max_query_len, self.max_doc_len, self.length_norm = max_query_len, max_doc_len, length_norm
        self.register_buffer("mu", mu, persistent=False)
        self.register_buffer("sigma", sigma, persistent=False)
        n_features = len(mu) * (2 if length_norm else 1)
        official = saturation == "official"
        self.dense = nn.Linear(n_features, 1, bias=not official)
        # Small initial weights, as KNRM: log-sum features are large and a big first step wrecks the embeddings.
        nn.init.uniform_(self.dense.weight, -0.014, 0.014)
        if official:  # the official code's per-kernel scale inside the log
            self.kernel_alpha = nn.Parameter(torch.ones(len(mu)))
        else:
            nn.init.zeros_(self.dense.bias)
        self.exact_match = ExactMatch() if exact_match else None
        self._kept_documents = kept_documents.KeptDocuments()

    @classmethod
    def from_config(cls, params, corpus):
        embedder_keys, context_keys, kernel_keys, own = split_config(
            "tk", params, WordEmbedder, Contextualizer, tk_kernels, cls.__init__
        )
        embedder = WordEmbedder.for_corpus(corpus, **embedder_keys)
        sizes = {**config_keys(cls.__init__), **own}  # the learned position table must hold the longest input
        longest = max(sizes["max_query_len"], sizes["max_doc_len"])
        return cls(embedder, Contextualizer(embedder.dim, longest, **context_keys), *tk_kernels(**kernel_keys), **own)

    def encode(self, queries, doc_ids, docs):
        return self.embedder.encode_pair(queries, docs, self.max_query_len, self.max_doc_len)

    def forward(self, query: torch.Tensor, doc: torch.Tensor) -> torch.Tensor:
        return self._score(query, doc)

    def _document_states(self, doc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """ids [B, L] -> contextualised words [B, L, E] and their mask [B, L]: the side that never sees the query."""
        return self._contextualise_document(*self.embedder(doc))

    def _contextualise_document(self, d: torch.Tensor, d_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.contextualizer(d, d_mask, is_document=True), d_mask

    def score_pairs(self, queries, doc_ids, docs):
        """The forward's scores with each distinct document contextualised once per job (``kept_documents``)."""
        if not kept_documents.applies(self):
            return super().score_pairs(queries, doc_ids, docs)
        batch = {k: v.to(self.device) for k, v in self.encode(queries, doc_ids, docs).items()}
        kept = self._kept_documents.get(self, docs, self._contextualise_texts)
        return self._score(batch["query"], batch["doc"], kept_documents.padded(kept, batch["doc"].shape[1]))

    def _contextualise_texts(self, docs: list[str]) -> list[tuple[torch.Tensor, ...]]:
        ids = self.embedder.encode(docs, self.max_doc_len).to(self.device)
        return kept_documents.trimmed_rows(self._document_states(ids), (ids != PAD).sum(dim=1).tolist())

    def _score(
        self, query: torch.Tensor, doc: torch.Tensor, states: tuple[torch.Tensor, ...] | None = None
    ) -> torch.Tensor:
        """The score; ``states``: the documents' (``_document_states``), if already made. Otherwise the two sides
        run in the order the forward always ran them (query words, document words, then their contexts): another
        order sums the contextualiser's ``mix`` gradient in another order, and training moved in the last bits."""
        q, q_mask = self.embedder(query)
        if states is None:
            words = self.embedder(doc)
            q = self.contextualizer(q, q_mask)
            states = self._contextualise_document(*words)
        else:
            q = self.contextualizer(q, q_mask)
        d, d_mask = states
        kernels = rbf_kernels(cosine_matrix(q, d), self.mu, self.sigma) * d_mask[:, None, :, None]
        per_term = kernels.sum(dim=2)  # [B, Lq, K]
        q_weight = self.embedder.query_weights(query, q_mask)[..., None]
        features = [(self._saturate(per_term) * q_weight).sum(dim=1)]
        if self.length_norm:
            doc_len = d_mask.sum(dim=1).clamp(min=1.0)
            features.append((per_term / doc_len[:, None, None] * q_weight).sum(dim=1))
        score = self.dense(torch.cat(features, dim=-1)).squeeze(-1)
        if self.exact_match is not None:
            score = score + self.exact_match(query, doc, q_weight[..., 0])
        return score

    def _saturate(self, per_term: torch.Tensor) -> torch.Tensor:
        """Kernel sums per query term [B, Lq, K] -> log-saturated features (``saturation``)."""
        if self.saturation == "official":
            return torch.log(torch.clamp(per_term * self.kernel_alpha, min=MIN_SUM))
        return torch.log(torch.clamp(per_term, min=MIN_SUM)) * 0.01
