"""TKL's Eq. 1 (Hofstätter et al., SIGIR 2020): a document contextualised in overlapping windows of w tokens with
o tokens of context on each side, and the windows packed so that those holding only padding are not run (the
paper's "more compact packing of padded documents"). The model is ``models/tkl.py``."""

from __future__ import annotations

import torch
import torch.nn.functional as F

# Packing skips windows with no real token in their kept middle, but gathers the others into one batch and scatters
# the results back: two copies of every kept window. Where it would skip fewer than this fraction of the batch's
# windows the copies cost about what the skipped windows save (CPU, TKL's one-layer contextualiser, 16 documents;
# docs/studies/speed.md), so the batch runs unpacked.
PACK_MIN_SKIPPED = 0.15
# On a GPU a batch of few windows is bound by kernel launches, not by its windows: packing ran 0.96x unpacked over
# the 320 windows of a batch of 32 TKL-400 documents and 1.51x over TKL-2k's 1,600 (one H100; docs/studies/speed.md
# section 5). A CUDA batch of fewer windows than this, a point between the two measured ones, runs unpacked.
PACK_MIN_WINDOWS_CUDA = 1024


def packing_may_pay(windows: int, device_type: str) -> bool:
    """Whether a batch of ``windows`` windows on ``device_type`` is worth checking for padding windows to skip."""
    return device_type != "cuda" or windows >= PACK_MIN_WINDOWS_CUDA


def split_windows(
    vectors: torch.Tensor, mask: torch.Tensor, window: int, overlap: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """[B, L, E], [B, L] -> windows [B, n, w + 2o, E] and their masks [B, n, w + 2o], n = ceil(L / w); window i
    holds tokens i*w - o .. (i+1)*w + o - 1 (padding outside the document)."""
    length = vectors.shape[1]
    n = max(1, -(-length // window))
    right = n * window - length + overlap
    vectors = F.pad(vectors, (0, 0, overlap, right))
    mask = F.pad(mask, (overlap, right))
    size = window + 2 * overlap
    return vectors.unfold(1, size, window).permute(0, 1, 3, 2), mask.unfold(1, size, window)


def merge_windows(windows: torch.Tensor, window: int, overlap: int, length: int) -> torch.Tensor:
    """Inverse of ``split_windows``: keep each window's middle w vectors -> [B, length, E]."""
    batch, n, _, dim = windows.shape
    return windows[:, :, overlap : overlap + window].reshape(batch, n * window, dim)[:, :length]


def contextualize_windows(
    vectors: torch.Tensor, mask: torch.Tensor, contextualize, window: int, overlap: int, pack: bool = True
) -> tuple[torch.Tensor, int]:
    """Eq. 1 on a batch: ``contextualize([N, w+2o, E], [N, w+2o]) -> [N, w+2o, E]`` runs once over the windows.
    Packed: only windows with a real token in their kept middle, where that skips at least ``PACK_MIN_SKIPPED`` of
    the batch's windows (otherwise the gather and scatter cost more than the few windows they save) and, on a GPU,
    the batch has ``PACK_MIN_WINDOWS_CUDA`` windows; unpacked: every window. Returns the contextualised document
    [B, L, E] and the number of windows contextualised."""
    batch, length, dim = vectors.shape
    windows, window_mask = split_windows(vectors, mask, window, overlap)
    n, size = windows.shape[1], windows.shape[2]
    flat, flat_mask = windows.reshape(-1, size, dim), window_mask.reshape(-1, size)
    if pack and packing_may_pay(flat.shape[0], flat.device.type):
        kept = (flat_mask[:, overlap : overlap + window].sum(dim=1) > 0).nonzero().squeeze(1)
        if len(kept) <= (1 - PACK_MIN_SKIPPED) * flat.shape[0]:
            out = flat.new_zeros(flat.shape)
            if len(kept):
                packed = contextualize(flat.index_select(0, kept), flat_mask.index_select(0, kept))
                out.index_copy_(0, kept, packed.to(out.dtype))
            return merge_windows(out.reshape(batch, n, size, dim), window, overlap, length), len(kept)
    out = contextualize(flat, flat_mask)
    return merge_windows(out.reshape(batch, n, size, dim), window, overlap, length), flat.shape[0]
