"""MORES: Gao, Dai & Callan, "Modularized Transformer-based Ranking Framework" (EMNLP 2020).

Three modules (Sec. 3.1):

- Document Representation Module: a full pretrained encoder over ``[CLS] doc [SEP]`` (Eq. 1-2) -> D.
- Query Representation Module: the first L-K layers of a second copy over ``[CLS] query [SEP]`` (Eq. 3-4) -> Q.
  The two never see each other's tokens.
- Interaction Module: K Interaction Blocks (Eq. 5-9), each query->document cross-attention, query
  self-attention, FFN, every one residual + LayerNorm; D stays fixed. Score = w^T CLS(H_K) (Eq. 10).

Initialisation (Sec. 3.3, "BERT weight assisted"): document module = one copy of the pretrained weights;
query module = first L-K layers of another copy, IBs = its last K layers, and each IB's cross-attention
starts as a copy of that layer's self-attention (``cross_attention_init: copy``; ``random`` is the
Table 3 ablation). Loss: pointwise (Dai & Callan 2019), i.e. ``pointwise_bce``.

Reuse (Sec. 3.2): ``reuse: s1`` stores D per document, ``reuse: s2`` stores each IB's key/value
projections D W_k, D W_v (Eq. 11-12). ``python -m longrank precompute`` writes the store
(:mod:`longrank.models.mores_store`); ``attach_store`` makes ``score_pairs`` read documents by id. All
three paths compute the same scores (tests/test_mores.py).
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from longrank.io import InputError
from longrank.models.base import Ranker
from longrank.models.encoders import DEFAULT_ENCODER, encoder_layers, load_encoder, load_tokenizer, single_inputs

DOC_SEGMENT = 1  # document tokens carry segment B, as in the BERT ranker's pair input


def attend(attention, x: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
    """Multi-head attention of ``x`` over projected ``keys``/``values``, then BERT's output projection and
    LN(. + x). ``attention`` is a BertAttention (``.self``: query/key/value/dropout, ``.output``: dense/LN)."""
    heads = attention.self.num_attention_heads
    split = lambda t: t.view(t.shape[0], t.shape[1], heads, -1).transpose(1, 2)  # noqa: E731
    context = F.scaled_dot_product_attention(
        split(attention.self.query(x)), split(keys), split(values),
        attn_mask=key_mask[:, None, None, :].bool(),
        dropout_p=attention.self.dropout.p if attention.training else 0.0,
    )
    return attention.output(context.transpose(1, 2).reshape(x.shape), x)


class InteractionBlock(nn.Module):
    """Eq. 5-7 built from one pretrained BertLayer: its self-attention and FFN, plus a cross-attention."""

    def __init__(self, layer, cross_attention_init: str = "copy", initializer_range: float = 0.02):
        super().__init__()
        self.cross_attention = copy.deepcopy(layer.attention)
        self.self_attention = layer.attention
        self.intermediate, self.output = layer.intermediate, layer.output
        if cross_attention_init == "random":
            for module in self.cross_attention.modules():
                if isinstance(module, nn.Linear):
                    nn.init.normal_(module.weight, std=initializer_range)
                    nn.init.zeros_(module.bias)
                elif isinstance(module, nn.LayerNorm):
                    nn.init.ones_(module.weight)
                    nn.init.zeros_(module.bias)
        elif cross_attention_init != "copy":
            raise InputError(f"cross_attention_init: expected 'copy' or 'random', got {cross_attention_init!r}")

    def project_document(self, doc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(D W_k, D W_v): the part Reuse-S2 precomputes (Eq. 11)."""
        return self.cross_attention.self.key(doc), self.cross_attention.self.value(doc)

    def forward(self, h, query_mask, doc_keys, doc_values, doc_mask):
        x = attend(self.cross_attention, h, doc_keys, doc_values, doc_mask)  # Eq. 5
        sa = self.self_attention.self
        x = attend(self.self_attention, x, sa.key(x), sa.value(x), query_mask)  # Eq. 6
        return self.output(self.intermediate(x), x)  # Eq. 7


class MORES(Ranker):
    default_loss = "pointwise_bce"

    def __init__(self, encoder, tokenizer, interaction_blocks: int = 2, max_query_len: int = 30, max_doc_len: int = 510,
                 cross_attention_init: str = "copy", reuse: str = "none"):
        super().__init__()
        n_layers = len(encoder_layers(encoder))
        if not 1 <= interaction_blocks < n_layers:
            raise InputError(f"interaction_blocks: expected 1..{n_layers - 1} for a {n_layers}-layer encoder, got {interaction_blocks!r}")
        if reuse not in {"none", "s1", "s2"}:
            raise InputError(f"reuse: expected 'none', 's1' or 's2', got {reuse!r}")
        max_pos = getattr(encoder.config, "max_position_embeddings", 512)
        if max_doc_len + 2 > max_pos or max_query_len + 2 > max_pos:
            raise InputError(f"max_doc_len/max_query_len: + 2 special tokens must fit the encoder's {max_pos} positions")
        self.tokenizer = tokenizer
        self.max_query_len, self.max_doc_len, self.reuse = max_query_len, max_doc_len, reuse
        self.document_module = copy.deepcopy(encoder)  # copy 1: all L layers
        split = n_layers - interaction_blocks
        layers = encoder_layers(encoder)  # copy 2: first L-K layers -> query module, last K -> IBs
        init_range = getattr(encoder.config, "initializer_range", 0.02)
        self.interaction_blocks = nn.ModuleList(InteractionBlock(layer, cross_attention_init, init_range) for layer in layers[split:])
        encoder.encoder.layer = nn.ModuleList(layers[:split])
        encoder.config = copy.deepcopy(encoder.config)
        encoder.config.num_hidden_layers = split
        self.query_module = encoder
        self.head = nn.Linear(encoder.config.hidden_size, 1)
        nn.init.normal_(self.head.weight, std=init_range)
        nn.init.zeros_(self.head.bias)
        self.store = None

    @classmethod
    def from_config(cls, params, corpus=None):
        known = {"encoder", "interaction_blocks", "max_query_len", "max_doc_len", "cross_attention_init", "reuse"}
        unknown = set(params) - known
        if unknown:
            raise InputError(f"mores: unknown keys {sorted(unknown)}; expected some of {sorted(known)}")
        name = params.get("encoder", DEFAULT_ENCODER)
        return cls(load_encoder(name), load_tokenizer(name), **{k: v for k, v in params.items() if k != "encoder"})

    # --- tokenisation -------------------------------------------------------------------------------
    def encode_queries(self, queries: list[str]) -> dict[str, torch.Tensor]:
        return single_inputs(self.tokenizer, queries, self.max_query_len, segment=0)

    def encode_docs(self, docs: list[str]) -> dict[str, torch.Tensor]:
        return single_inputs(self.tokenizer, docs, self.max_doc_len, segment=DOC_SEGMENT)

    def encode(self, queries, docs):
        q, d = self.encode_queries(queries), self.encode_docs(docs)
        return {**{f"q_{k}": v for k, v in q.items()}, **{f"d_{k}": v for k, v in d.items()}}

    # --- the three modules --------------------------------------------------------------------------
    def represent_queries(self, input_ids, attention_mask, token_type_ids) -> torch.Tensor:
        return self.query_module(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state

    def represent_docs(self, input_ids, attention_mask, token_type_ids) -> torch.Tensor:
        return self.document_module(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state

    def project_docs(self, doc: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [ib.project_document(doc) for ib in self.interaction_blocks]

    def interact(self, query: torch.Tensor, query_mask, doc_kv: list[tuple[torch.Tensor, torch.Tensor]], doc_mask) -> torch.Tensor:
        h = query
        for ib, (keys, values) in zip(self.interaction_blocks, doc_kv):
            h = ib(h, query_mask, keys, values, doc_mask)  # Eq. 8-9
        return self.head(h[:, 0]).squeeze(-1)  # Eq. 10

    def forward(self, q_input_ids, q_attention_mask, q_token_type_ids, d_input_ids, d_attention_mask, d_token_type_ids):
        query = self.represent_queries(q_input_ids, q_attention_mask, q_token_type_ids)
        doc = self.represent_docs(d_input_ids, d_attention_mask, d_token_type_ids)
        return self.interact(query, q_attention_mask, self.project_docs(doc), d_attention_mask)

    # --- reranking with precomputed documents -------------------------------------------------------
    def attach_store(self, path) -> None:
        """Read documents from a store that ``python -m longrank precompute`` wrote for this model's weights."""
        from longrank.models.mores_store import ReuseStore

        self.store = ReuseStore.open(path, self)

    @torch.no_grad()
    def score_pairs(self, queries, doc_ids, docs):
        device = self.device
        # The query module runs once per distinct query (Table 1, "Query Representation": once per query).
        distinct = {text: i for i, text in enumerate(dict.fromkeys(queries))}
        q = {k: v.to(device) for k, v in self.encode_queries(list(distinct)).items()}
        reps = self.represent_queries(**q)
        pick = torch.tensor([distinct[text] for text in queries], device=device)
        query, query_mask = reps[pick], q["attention_mask"][pick]
        if self.store is None:
            d = {k: v.to(device) for k, v in self.encode_docs(docs).items()}
            return self.interact(query, query_mask, self.project_docs(self.represent_docs(**d)), d["attention_mask"])
        return self.interact(query, query_mask, *self.store.doc_kv(doc_ids, self, device))
