"""TK's contextualiser (TK, TKL): a small Transformer over word vectors with a learned raw/contextual mix."""

from __future__ import annotations

import torch
from torch import nn

from longrank.errors import InputError
from longrank.models.modules.positions import SINUSOIDS, sinusoidal_positions
from longrank.models.modules.transformer import EncoderLayer

POSITIONS = ("fixed", "learned")


class Contextualizer(nn.Module):
    """TK's representation: Transformer over (embedding + position) with a learned raw/contextual mix.

    Input vectors [N, L, E] and mask [N, L] (1 = real token); output [N, L, E] with padding vectors zeroed.
    Rows without any real token (an empty query, a padding-only TKL window on the unpacked path) would make
    attention's softmax NaN; they attend over their (ignored) padding instead and their output is zeroed.

    Position features (official code): queries take sinusoid rows 0, 1, ... and documents rows
    ``doc_position_offset`` (500), 501, ..., so the Transformer can tell a query from a document token;
    ``positions: fixed`` keeps the sinusoids (TK, ECAI 2020), ``learned`` starts from them and trains them
    (TKL, SIGIR 2020). ``doc_position_offset: 0`` shares one set of positions (an ablation: position no longer tells the two apart).
    ``max_positions`` is the longest sequence the model feeds (a learned table has one row per position).
    ``sinusoids`` picks the sinusoid frequencies (the fixed table, or the learned table's start): ``project``
    (default) or ``official``, matchmaker's table (``modules.positions``; neither paper fixes them).
    """

    def __init__(
        self,
        dim: int,
        max_positions: int,
        n_layers: int = 2,
        n_heads: int = 10,
        ff_dim: int = 300,
        dropout: float = 0.0,
        positions: str = "fixed",
        doc_position_offset: int = 500,
        sinusoids: str = "project",
    ):
        super().__init__()
        if dim % n_heads:
            raise InputError(
                f"n_heads: {n_heads} heads must divide the embedding width {dim} (e.g. 10 for 50d or 300d GloVe)"
            )
        if positions not in POSITIONS:
            raise InputError(f"positions: {positions!r} is not one of {list(POSITIONS)}")
        if sinusoids not in SINUSOIDS:
            raise InputError(f"sinusoids: {sinusoids!r} is not one of {list(SINUSOIDS)}")
        if doc_position_offset < 0:
            raise InputError(f"doc_position_offset: must be >= 0, got {doc_position_offset}")
        self.layers = nn.ModuleList(EncoderLayer(dim, n_heads, ff_dim, dropout) for _ in range(n_layers))
        self.mix = nn.Parameter(torch.tensor(0.5))
        self.doc_position_offset, self.sinusoids = doc_position_offset, sinusoids
        self.position_table = None
        if positions == "learned":
            self.position_table = nn.Parameter(
                sinusoidal_positions(doc_position_offset + max_positions, dim, sinusoids=sinusoids)
            )

    def positions(self, length: int, offset: int, dim: int, device) -> torch.Tensor:
        if self.position_table is None:
            return sinusoidal_positions(offset + length, dim, device, self.sinusoids)[offset:]
        if offset + length > len(self.position_table):
            raise InputError(
                f"a sequence of {length} tokens exceeds the {len(self.position_table) - offset} learned positions"
            )
        return self.position_table[offset : offset + length]

    def forward(self, vectors: torch.Tensor, mask: torch.Tensor, is_document: bool = False) -> torch.Tensor:
        attend = mask > 0
        attend = (attend | ~attend.any(dim=1, keepdim=True))[:, None, None, :]  # all-padding rows: attend to all
        offset = self.doc_position_offset if is_document else 0
        contextual = vectors + self.positions(vectors.shape[1], offset, vectors.shape[2], vectors.device)
        for layer in self.layers:
            contextual = layer(contextual, attend)
        return (self.mix * vectors + (1 - self.mix) * contextual) * mask[..., None]
