"""NDRM1's latent match (:mod:`longrank.models.ndrm`, Fig. 1b): the document's words through the Conformer encoder
and the raw/contextual mix, the query terms' vectors (an embedding lookup and one linear map: not contextualised, so
that query terms stay independent), and each term's score, its best window's under windowed kernel pooling."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn
from torch.nn import functional as F

from longrank.data.words import PAD
from longrank.models.base import config_keys
from longrank.models.modules.conformer import ConformerLayer
from longrank.models.modules.positions import sinusoidal_positions
from longrank.models.modules.windowed_kernel_pooling import aligned_length, term_kernels, windowed_kernel_pooling
from longrank.models.ndrm_inputs import DOC_MARKERS

if TYPE_CHECKING:
    from longrank.models.modules.word_embedder import WordEmbedder

#: ``_encode_documents``' result: unit document vectors [D, L, H], their mask [D, L], the documents' lengths [D]
EncodedDocuments = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


class LatentMatch:
    """NDRM1's layers and scoring, a base of :class:`longrank.models.ndrm.NDRM` (which sets what these read:
    ``embedder``, ``latent_row``, ``doc_markers``, ``position_layout``, ``pool_window``, ``pool_stride``,
    ``score_padding_windows``, ``mu`` and ``sigma``); ``_add_latent_model`` adds the layers to the model itself."""

    embedder: WordEmbedder
    latent_row: torch.Tensor  # buffers: each id's embedding row, the kernels' centres and widths
    mu: torch.Tensor
    sigma: torch.Tensor
    doc_markers: bool
    position_layout: str
    pool_window: int
    pool_stride: int
    score_padding_windows: bool

    def _add_latent_model(
        self, dim: int, hidden_dim: int, n_heads: int, n_layers: int, conformer: dict, n_kernels: int
    ) -> None:
        """NDRM1's layers (:mod:`longrank.models.ndrm`): projections, Conformer encoder, raw/contextual mix, window
        scorer."""
        layer_keys = {**config_keys(ConformerLayer), **conformer}
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
            nn.Linear(n_kernels, hidden_dim), nn.ReLU(), nn.Dropout(layer_keys["dropout"]), nn.Linear(hidden_dim, 1)
        )

    def _encode_documents(self, doc: torch.Tensor) -> EncodedDocuments:
        """doc ids [D, L] -> unit document vectors [D, L, H] (zero at padding/OOV), mask [D, L], lengths [D]."""
        marker = doc >= len(self.embedder.vocab) if self.doc_markers else None
        words = doc if marker is None else doc.masked_fill(marker, PAD)
        vectors, mask = self.embedder.embedding(self.latent_row[words]), self.embedder.token_mask(words)
        if marker is not None:
            vectors = torch.where(
                marker[..., None], self.markers((doc - len(self.embedder.vocab)).clamp(min=0)), vectors
            )
            mask = mask + marker.to(mask.dtype)
        raw = self.project(vectors)
        positions = sinusoidal_positions(doc.shape[1], raw.shape[-1], raw.device, layout=self.position_layout)
        contextual = self.position_dropout(raw + positions)
        for layer in self.encoder:
            contextual = layer(contextual, mask)
        a, c = self.mix.weight[0]  # the mix as a Linear(2, 1) over [raw, contextual], without stacking the two
        mixed = a * raw + c * contextual + self.mix.bias
        return F.normalize(mixed, dim=-1, eps=1e-8) * mask[..., None], mask, (doc != PAD).sum(dim=1)

    def _query_vectors(self, ids: torch.Tensor) -> torch.Tensor:
        rows = self.latent_row[ids]
        return F.normalize(self.query_proj(self.project(self.embedder.embedding(rows))), dim=-1, eps=1e-8)

    def _latent_scores(self, q: torch.Tensor, docs: EncodedDocuments) -> torch.Tensor:
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
