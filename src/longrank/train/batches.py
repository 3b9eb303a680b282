"""The training batches, step by step: a function of the seed and the step only, so a resumed run draws the batches an
uninterrupted one draws, and N processes draw the global batch one process draws."""

from __future__ import annotations

import hashlib

import torch

# How long the loop waits for a worker's batch before it raises: a batch is the tokenisation of one step's documents,
# well under a second; ten minutes says the worker is stuck (and the error names the DataLoader's timeout).
WORKER_TIMEOUT_S = 600


class TrainingBatches(torch.utils.data.IterableDataset):
    """The training steps ``start .. stop - 1`` as ``(step, micro-batches)``: the sampler's global batch of each step
    (a function of the seed and the step only), this rank's ``share`` of it from ``offset``, cut into ``micro``
    contiguous micro-batches of whole groups (``train.accumulation``; 1: the share whole), each ``(groups, encoded
    batch)``: its queries and documents read and encoded by ``encode`` (the model's tokenisation: no weights
    involved). Each micro-batch is encoded alone, so it is padded to its own longest document, as a batch of its size.

    With ``num_workers`` W > 0, worker k prepares steps start + k, start + k + W, ... and the DataLoader hands
    them back in step order, so a GPU is not kept waiting on Python tokenisation. Workers are forked: the
    document store reopens its files per process."""

    def __init__(
        self, sampler, corpus, encode, start: int, stop: int, batch_size: int, offset: int, share: int, micro: int = 1
    ):
        self.sampler, self.corpus, self.encode = sampler, corpus, encode
        self.start, self.stop, self.batch_size, self.offset, self.share = start, stop, batch_size, offset, share
        self.micro = micro

    def __iter__(self):
        worker = torch.utils.data.get_worker_info()
        first, stride = (0, 1) if worker is None else (worker.id, worker.num_workers)
        size = self.share // self.micro
        for step in range(self.start + first, self.stop, stride):
            qids, groups = self.sampler.batch(step, self.batch_size)  # the global batch, the same on every rank
            qids, groups = qids[self.offset : self.offset + self.share], groups[self.offset : self.offset + self.share]
            # one item per step, its micro-batches together: the DataLoader takes its workers' items in turn
            yield step, [self._encoded(qids[i : i + size], groups[i : i + size]) for i in range(0, self.share, size)]

    def _encoded(self, qids: list[str], groups: list[list[str]]) -> tuple[int, dict]:
        queries = [self.corpus.queries[q] for q, g in zip(qids, groups) for _ in g]
        doc_ids = [d for g in groups for d in g]
        return len(groups), self.encode(queries, doc_ids, [self.corpus.docs[d] for d in doc_ids])

    @staticmethod
    def loader(batches: TrainingBatches, num_workers: int) -> torch.utils.data.DataLoader:
        if not num_workers:
            return torch.utils.data.DataLoader(batches, batch_size=None)
        return torch.utils.data.DataLoader(
            batches,
            batch_size=None,
            num_workers=num_workers,
            prefetch_factor=2,
            multiprocessing_context="fork",
            timeout=WORKER_TIMEOUT_S,
        )


def step_seed(seed: int, step: int, rank: int) -> int:
    """The seed of one step's dropout noise: rank 0's is a single process's (so one process trains as it always
    has), the other ranks' are independent of it (their shares hold other queries)."""
    base = seed * 1_000_003 + step
    if rank == 0:
        return base
    return int.from_bytes(hashlib.sha256(f"{base}/{rank}".encode()).digest()[:8], "little")
