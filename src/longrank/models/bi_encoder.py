"""Zero-shot bi-encoder: the floor any trained encoder model has to beat.

Query and document are encoded independently (``[CLS] text [SEP]``), token states are mean-pooled under
the attention mask -- the pooling all-MiniLM-L6-v2 was trained with -- and the score is the cosine of the
two vectors. Nothing is trained: use it with ``train: {steps: 0}``. Should someone train it anyway, the
default loss is the listwise softmax cross-entropy its contrastive pre-training used, over cosine x
``scale`` (default 1 so the score is the plain cosine; set 20, sentence-transformers' value, to train).
``scale`` never changes the ranking.

Reranking embeds each document once (``score_pairs``): a document is a candidate of many queries (the default
run's 4,500 pairs hold 1,172 documents) and its vector does not depend on the query. The vectors are kept
(:mod:`longrank.models.modules.kept_documents`) while the weights and the autocast stay as they were, so the scores
are the pairwise forward's to fp32's rounding (the default run's run files are byte-identical either way;
tests/test_kept_documents.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from longrank.models.base import Ranker
from longrank.models.modules import kept_documents
from longrank.models.modules.encoders import encoder_choice, from_encoder_config, mean_pool, single_inputs


class BiEncoder(Ranker):
    default_loss = "listwise_ce"
    config_parts = (encoder_choice,)

    def __init__(self, encoder, tokenizer, max_query_len: int = 30, max_doc_len: int = 254, scale: float = 1.0):
        super().__init__()
        self.encoder, self.tokenizer = encoder, tokenizer
        self.max_query_len, self.max_doc_len, self.scale = max_query_len, max_doc_len, scale
        self._kept_documents = kept_documents.KeptDocuments()

    @classmethod
    def from_config(cls, params, corpus=None):
        return from_encoder_config(cls, "bi_encoder", params)

    def encode(self, queries, doc_ids, docs):
        q = single_inputs(self.tokenizer, queries, self.max_query_len)
        d = single_inputs(self.tokenizer, docs, self.max_doc_len)
        return {**{f"q_{k}": v for k, v in q.items()}, **{f"d_{k}": v for k, v in d.items()}}

    def embed(self, input_ids, attention_mask, token_type_ids) -> torch.Tensor:
        states = self.encoder(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state
        return mean_pool(states, attention_mask)

    def score_pairs(self, queries, doc_ids, docs):
        """The pairwise forward's scores, each distinct query and document embedded once: documents are looked up
        by their text in the vectors kept from earlier batches (see the module docstring); new ones are embedded
        together. With a gradient or in training mode (dropout) it is the plain forward."""
        if not kept_documents.applies(self):
            return super().score_pairs(queries, doc_ids, docs)
        doc_vectors = self._kept_documents.get(self, docs, lambda new: self._embed_texts(new, self.max_doc_len))
        distinct_queries = list(dict.fromkeys(queries))
        query_vectors = dict(zip(distinct_queries, self._embed_texts(distinct_queries, self.max_query_len)))
        q = torch.stack([query_vectors[t] for t in queries])
        d = torch.stack(doc_vectors)
        return F.cosine_similarity(q, d, dim=-1) * self.scale

    def _embed_texts(self, texts: list[str], max_len: int) -> torch.Tensor:
        inputs = single_inputs(self.tokenizer, texts, max_len)
        return self.embed(**{k: v.to(self.device) for k, v in inputs.items()})

    def forward(self, q_input_ids, q_attention_mask, q_token_type_ids, d_input_ids, d_attention_mask, d_token_type_ids):
        q = self.embed(q_input_ids, q_attention_mask, q_token_type_ids)
        d = self.embed(d_input_ids, d_attention_mask, d_token_type_ids)
        return F.cosine_similarity(q, d, dim=-1) * self.scale
