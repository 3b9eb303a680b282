"""A document's query-independent representation, computed once per reranking job and kept by the document's text.

A document is a candidate of many queries: the default run's MORES test rerank scores 1,580 pairs of 782 documents,
its dev rerank 680 pairs of 475 (docs/studies/speed.md, "The default run's time"). A model whose document side does not see the query (the
bi-encoder's vector, MORES's document module, TK's and TKL's contextualised words, NDRM's Conformer) computes it for
the documents of a batch it has not kept yet, together, and reads the others back. Only ``score_pairs`` (reranking,
the dev reranks of training) reads them: the forward, which the benches time, computes every document.

What is kept depends on the weights and on the autocast as well as on the text, so it is kept only while they stay as
they were: an optimiser step or ``load_state_dict`` changes a parameter's version and starts again, and
``Ranker.train()`` drops it. Only at inference (no gradient, eval mode): training and its dropout take the model's
own forward. Kept entries were computed beside other documents than the batch's (padded to another length), so a
score equals the pairwise forward's to fp32's rounding, not always to the bit (tests/test_kept_documents.py)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import torch
from torch import nn


def applies(model: nn.Module) -> bool:
    """Whether ``model`` may read kept representations now: inference, no gradient."""
    return not torch.is_grad_enabled() and not model.training


def weights_key(model: nn.Module) -> tuple:
    """What a kept representation depends on besides the text: every weight (an optimiser step or
    ``load_state_dict`` bumps its version; a new tensor has a new address) and the autocast the model runs under."""
    device_type = next(model.parameters()).device.type
    autocast = torch.is_autocast_enabled(device_type) and torch.get_autocast_dtype(device_type)
    return autocast, tuple((p.data_ptr(), p._version) for p in model.parameters())


class KeptDocuments:
    """Representations by document text, for one model (see the module docstring). ``limit_bytes`` bounds memory for
    very large reranking jobs: past it, start again (a miss only costs its recomputation)."""

    def __init__(self, limit_bytes: int = 1 << 30):
        self.limit_bytes = limit_bytes
        self._key: tuple | None = None
        self._kept: dict = {}
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._kept)

    def clear(self) -> None:
        self._key, self._kept, self._bytes = None, {}, 0

    def get(self, model: nn.Module, texts: Sequence[Hashable], compute: Callable[[list], Sequence]) -> list:
        """Each text's representation, in order. ``compute(new)`` gives those of the distinct texts not kept, in one
        call (one batch): one tensor or tuple of tensors each, kept as it is (a view keeps the tensor it views alive:
        clone a slice of a padded batch that is not kept whole)."""
        key = weights_key(model)
        if key != self._key or self._bytes > self.limit_bytes:
            self.clear()
            self._key = key
        new = [t for t in dict.fromkeys(texts) if t not in self._kept]
        if new:
            computed = list(compute(new))
            self._kept.update(zip(new, computed))
            tensors = [t for entry in computed for t in (entry if isinstance(entry, tuple) else (entry,))]
            self._bytes += sum(t.numel() * t.element_size() for t in tensors)
        return [self._kept[t] for t in texts]


def trimmed_rows(states: Sequence[torch.Tensor], lengths: Sequence[int]) -> list[tuple[torch.Tensor, ...]]:
    """Per document of a padded batch, each of ``states`` ([B, L, ...]) cut to the document's length, as copies."""
    return [tuple(s[i, :n].clone() for s in states) for i, n in enumerate(lengths)]


def padded(rows: Sequence[tuple[torch.Tensor, ...]], width: int) -> tuple[torch.Tensor, ...]:
    """``trimmed_rows``' entries back as a batch: each part [B, width, ...], zeros past a document's length (what a
    document's mask leaves unread)."""
    out = []
    for part in zip(*rows):
        batch = part[0].new_zeros((len(part), width, *part[0].shape[1:]))
        for i, row in enumerate(part):
            batch[i, : len(row)] = row
        out.append(batch)
    return tuple(out)
