"""TKL's window packing pays or is not used: a batch whose packing would skip fewer than PACK_MIN_SKIPPED of its
windows runs unpacked (the gather and scatter would cost what the skipped windows save), one that skips more runs
packed, and both give the unpacked path's vectors. On a GPU a batch of few windows runs unpacked whatever it could
skip (launch-bound: packing saved no time there)."""

from __future__ import annotations

import torch

from longrank.models.modules.windows import (
    PACK_MIN_SKIPPED,
    PACK_MIN_WINDOWS_CUDA,
    contextualize_windows,
    packing_may_pay,
)

WINDOW, OVERLAP, DIM = 10, 2, 4


def contextualize(vectors: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """A stand-in Transformer that mixes a window's positions (so a window's output depends on all of it)."""
    return torch.tanh(vectors + (vectors * mask[..., None]).mean(dim=1, keepdim=True))


def batch_of(lengths: list[int], width: int) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    mask = (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).long()
    return torch.randn(len(lengths), width, DIM) * mask[..., None], mask


def windows_run(lengths: list[int], width: int, pack: bool) -> tuple[torch.Tensor, int]:
    vectors, mask = batch_of(lengths, width)
    return contextualize_windows(vectors, mask, contextualize, WINDOW, OVERLAP, pack=pack)


def test_a_batch_with_little_to_skip_runs_unpacked():
    lengths = [100] * 9 + [91]  # 100 windows, none empty: packing would skip nothing
    (packed, passes), (unpacked, all_windows) = windows_run(lengths, 100, True), windows_run(lengths, 100, False)
    assert passes == all_windows == 100
    assert torch.equal(packed, unpacked)


def test_a_batch_with_many_empty_windows_runs_packed_with_the_same_vectors():
    lengths = [100, 100, 15, 15, 15, 15, 15, 15, 15, 15]  # 100 windows, 64 of them empty
    (packed, passes), (unpacked, all_windows) = windows_run(lengths, 100, True), windows_run(lengths, 100, False)
    assert all_windows == 100 and passes == 36 and passes <= (1 - PACK_MIN_SKIPPED) * all_windows
    mask = batch_of(lengths, 100)[1].bool()
    assert torch.allclose(packed[mask], unpacked[mask], atol=1e-6)  # real tokens alike; padding is masked later


def test_on_a_gpu_only_a_batch_of_many_windows_is_packed():
    # the H100's two measured points: a batch of 320 windows (packing 0.96x) and of 1,600 (1.51x)
    assert not packing_may_pay(320, "cuda") and packing_may_pay(1600, "cuda")
    assert 320 < PACK_MIN_WINDOWS_CUDA <= 1600
    assert packing_may_pay(10, "cpu")  # on a CPU the windows' own cost decides (PACK_MIN_SKIPPED)
