"""BERT ranker (cross-encoder): Nogueira & Cho, "Passage Re-ranking with BERT" (2019), with Dai & Callan's
(SIGIR 2019) FirstP / MaxP for long documents; the reference model of the MORES paper (Tables 2, 4) and
lines 2, 3, 5 of the MIR paper's Table 1.

Input ``[CLS] query [SEP] passage [SEP]`` (query segment 0, passage segment 1), a linear layer on the
[CLS] state gives the score. ``mode: firstp`` scores the first passage of the document; ``mode: maxp``
cuts the document into passages of ``passage_len`` WordPiece tokens every ``passage_stride`` tokens (at
most ``max_passages``) and takes the max over passage scores. ``passage_len`` counts *document* tokens:
the sequence is ``max_query_len + passage_len + 3`` long at most (BERT-base: keep it <= 512).

MaxP training, ``maxp_training`` (``mode: maxp`` only): ``passage`` (default) follows Dai & Callan (SIGIR
2019): every passage is a training example carrying its document's label, and the max over passages is
taken only at inference. In training mode (``self.training``) each document's score is the score of ONE
of its passages drawn uniformly at random with torch's RNG (the training loop seeds torch per step, so a
resumed run draws the same passages); over many steps that samples the passage-level training set, and
the loop's group loss over [positive, negatives] is unchanged. Only the drawn passage is run. In eval mode
the score is always the max. ``max`` is this project's earlier behaviour: training also goes through the max.

Recipe switches (see the training-recipe study in the README): ``pooling: cls | mean`` puts the linear
head on [CLS] or on the mean over the pair's tokens (the pooling all-MiniLM-L6-v2 was trained with);
``pooling: segment_cosine`` has no new head at all: the score is ``COSINE_SCALE`` x the cosine between the
mean of the query segment's output states and the mean of the passage segment's. That is the bi-encoder's
score computed inside the cross-encoder, so a sentence-embedding encoder starts fine-tuning from a ranking
near its zero-shot one instead of from a random head (train it with ``loss: listwise_ce``, the
contrastive objective it was pre-trained with). ``freeze_layers: N`` freezes the embeddings and the first
N layers. Loss: pointwise cross-entropy, as Nogueira & Cho and Dai & Callan.

Config keys and the source each default follows: ``mode`` (``firstp``), ``passage_len`` (256),
``passage_stride`` (= ``passage_len``), ``max_passages`` (16 for MaxP), ``max_query_len`` (30): this
project's CPU-sized settings (the TREC DL configs set GPU-sized ones); ``maxp_training`` (``passage``:
Dai & Callan's paper); ``pooling`` (``cls``: Nogueira & Cho's paper) and ``freeze_layers`` (0): this
project's recipe switches; ``encoder`` (see :mod:`longrank.models.modules.encoders`). Unknown keys are refused
by name.
"""

from __future__ import annotations

import torch
from torch import nn

from longrank.errors import InputError
from longrank.config.model_types import DEFAULT_MAX_PASSAGES
from longrank.models.base import Ranker
from longrank.models.modules.encoders import (
    encoder_choice,
    freeze_lower_layers,
    from_encoder_config,
    mean_pool,
    wordpiece_ids,
)


COSINE_SCALE = 20.0  # sentence-transformers' MultipleNegativesRankingLoss scale: cosines become logits


class BertRanker(Ranker):
    default_loss = "pointwise_bce"
    config_parts = (encoder_choice,)
    parameter_groups = {"scoring": ("head.",)}  # train.scoring_lr: the new score head on a pretrained encoder

    def __init__(
        self,
        encoder,
        tokenizer,
        mode: str = "firstp",
        passage_len: int = 256,
        passage_stride: int | None = None,
        max_passages: int | None = None,
        max_query_len: int = 30,
        pooling: str = "cls",
        freeze_layers: int = 0,
        maxp_training: str = "passage",
    ):
        super().__init__()
        if mode not in {"firstp", "maxp"}:
            raise InputError(f"mode: expected 'firstp' or 'maxp', got {mode!r}")
        if maxp_training not in {"passage", "max"}:
            raise InputError(f"maxp_training: expected 'passage' or 'max', got {maxp_training!r}")
        if pooling not in {"cls", "mean", "segment_cosine"}:
            raise InputError(f"pooling: expected 'cls', 'mean' or 'segment_cosine', got {pooling!r}")
        max_pos = getattr(encoder.config, "max_position_embeddings", 512)
        if max_query_len + passage_len + 3 > max_pos:
            raise InputError(
                f"passage_len: {passage_len} document tokens + max_query_len {max_query_len} + 3 special tokens exceed the encoder's {max_pos} positions"
            )
        self.encoder, self.tokenizer = encoder, tokenizer
        self.mode, self.pooling, self.maxp_training = mode, pooling, maxp_training
        self.passage_len, self.max_query_len = passage_len, max_query_len
        self.passage_stride = passage_stride or passage_len
        self.max_passages = 1 if mode == "firstp" else (max_passages or DEFAULT_MAX_PASSAGES)
        if self.passage_stride <= 0 or self.max_passages <= 0:
            raise InputError("passage_stride and max_passages must be positive")
        self.head: nn.Linear | None = None  # segment_cosine scores without a head
        if pooling != "segment_cosine":
            self.head = nn.Linear(encoder.config.hidden_size, 1)
            nn.init.normal_(self.head.weight, std=encoder.config.initializer_range)
            nn.init.zeros_(self.head.bias)
        freeze_lower_layers(encoder, freeze_layers)

    @classmethod
    def from_config(cls, params, corpus=None):
        return from_encoder_config(cls, "bert_ranker", params)

    def passages(self, doc_ids: list[int]) -> list[list[int]]:
        """Windows of ``passage_len`` tokens every ``passage_stride`` tokens; always at least one (maybe empty)."""
        starts = range(0, max(len(doc_ids) - self.passage_len, 0) + 1, self.passage_stride)
        windows = [doc_ids[s : s + self.passage_len] for s in starts][: self.max_passages]
        last = windows[-1] if windows else []
        # a document whose tail the stride skips gets one more window ending at its last token
        covered = (len(windows) - 1) * self.passage_stride + len(last)
        if covered < len(doc_ids) and len(windows) < self.max_passages:
            windows.append(doc_ids[-self.passage_len :])
        return windows

    @property
    def max_doc_len(self) -> int:
        """Document tokens read at most: FirstP's one passage, MaxP's ``max_passages`` strided windows."""
        return self.passage_stride * (self.max_passages - 1) + self.passage_len

    def encode(self, queries, doc_ids, docs):
        tok = self.tokenizer
        q_ids = wordpiece_ids(tok, queries, self.max_query_len)
        d_ids = wordpiece_ids(tok, docs, self.max_doc_len)
        rows = []
        for q, d in zip(q_ids, d_ids):
            head = [tok.cls_token_id, *q, tok.sep_token_id]
            rows.append([(head + p + [tok.sep_token_id], len(head)) for p in self.passages(d)])
        n_pass = max(len(r) for r in rows)
        length = max(len(seq) for r in rows for seq, _ in r)
        shape = (len(rows), n_pass, length)
        input_ids = torch.full(shape, tok.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros(shape, dtype=torch.long)
        token_type_ids = torch.zeros(shape, dtype=torch.long)
        passage_mask = torch.zeros(shape[:2], dtype=torch.bool)
        for i, r in enumerate(rows):
            for j, (seq, n_query) in enumerate(r):
                input_ids[i, j, : len(seq)] = torch.tensor(seq)
                attention_mask[i, j, : len(seq)] = 1
                token_type_ids[i, j, n_query : len(seq)] = 1
                passage_mask[i, j] = True
        return {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "token_type_ids": token_type_ids,
            "passage_mask": passage_mask,
        }

    def passage_scores(self, input_ids, attention_mask, token_type_ids, passage_mask) -> torch.Tensor:
        """[B, P] scores, -inf where a document has no passage (packed: padding passages are never run)."""
        keep = passage_mask.reshape(-1)
        flat = lambda t: t.reshape(-1, t.shape[-1])[keep]  # noqa: E731
        mask = flat(attention_mask)
        states = self.encoder(
            input_ids=flat(input_ids), attention_mask=mask, token_type_ids=flat(token_type_ids)
        ).last_hidden_state
        if self.pooling == "segment_cosine":
            segment = flat(token_type_ids)  # 0: [CLS] query [SEP], 1: passage [SEP]
            query, passage = mean_pool(states, mask * (1 - segment)), mean_pool(states, mask * segment)
            kept = COSINE_SCALE * torch.cosine_similarity(query, passage, dim=-1)
        else:
            assert self.head is not None  # every pooling but segment_cosine has one (``__init__``)
            kept = self.head(states[:, 0] if self.pooling == "cls" else mean_pool(states, mask)).squeeze(-1)
        scores = torch.full(keep.shape, float("-inf"), dtype=kept.dtype, device=kept.device)
        scores = scores.masked_scatter(keep, kept)
        return scores.view(passage_mask.shape)

    def sample_passages(self, passage_mask: torch.Tensor) -> torch.Tensor:
        """A mask keeping one passage per document, drawn uniformly among its passages with torch's (CPU) RNG,
        so the draw does not depend on the device."""
        mask = passage_mask.cpu()
        counts = mask.sum(dim=1)
        pick = torch.minimum((torch.rand(counts.shape) * counts).long(), (counts - 1).clamp(min=0))
        rank = mask.long().cumsum(dim=1) - 1  # 0, 1, ... over each document's passages
        return (mask & (rank == pick[:, None])).to(passage_mask.device)

    def forward(self, input_ids, attention_mask, token_type_ids, passage_mask):
        if self.training and self.mode == "maxp" and self.maxp_training == "passage":
            passage_mask = self.sample_passages(passage_mask)  # Dai & Callan: train on passages, max only at inference
        return self.passage_scores(input_ids, attention_mask, token_type_ids, passage_mask).max(dim=1).values
