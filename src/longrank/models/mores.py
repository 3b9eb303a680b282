"""MORES: Gao, Dai & Callan, "Modularized Transformer-based Ranking Framework" (EMNLP 2020).

Three modules (Sec. 3.1):

- Document Representation Module: a full pretrained encoder over ``[CLS] doc [SEP]`` (Eq. 1-2) -> D.
- Query Representation Module: the first L-K layers over ``[CLS] query [SEP]`` (Eq. 3-4) -> Q, with its
  own embeddings. The two never see each other's tokens.
- Interaction Module: K Interaction Blocks (Eq. 5-9), each query->document cross-attention, query
  self-attention, FFN, every one residual + LayerNorm; D stays fixed. Score = w^T CLS(H_K) (Eq. 10).

Initialisation (Sec. 3.3, "BERT weight assisted"): document module = one copy of the pretrained weights;
IBs = the last K layers of another copy, and each IB's cross-attention starts as a copy of that layer's
self-attention (``cross_attention_init: copy``; ``random`` is the Table 3 ablation). Loss: pointwise
(Dai & Callan 2019), i.e. ``pointwise_bce``.

Config keys and the source each default follows:

- ``interaction_blocks`` (K, default 2: the paper's main setting), ``max_query_len``, ``max_doc_len``,
  ``cross_attention_init`` (``copy``: paper Sec. 3.3 / Table 3), ``reuse`` (``none``/``s1``/``s2``: paper
  Sec. 3.2), ``encoder`` (see :mod:`longrank.models.modules.encoders`).
- ``tie_query_layers``: ``false`` is the paper (Sec. 3.3: the query module is initialised from "another copy"
  of BERT) and what the full-scale configs (config/trec-dl-20*.yaml) set: the query module owns a separate copy
  of those layers. The paper's parameter counts agree (Appendix A.2: 224M, 228M, 231M, 233M for 1-4 IBs): at
  BERT-base dimensions the untied layout has 220.1M / 222.5M / 224.9M / 227.2M (within 3% of them; the 1-6M
  left over is not explained by poolers, 1.2M), the tied one 142M-171M (tests/test_mores.py).
  ``true`` (the default, kept so that the CPU config, which leaves the key out, keeps its measured numbers) is
  the released code, luyug/MORES ``modeling.py``, where the query encoder is a deep copy of BERT whose layer
  list is then replaced by the document encoder's own first L-K layer objects: the query module's Transformer
  layers *are* the document module's first L-K layers (one set of weights, trained by both paths); its
  embeddings stay a separate copy, as there.
  Checkpoints hold a tied layer once, under ``document_module.``; a checkpoint saved untied does not load
  into a tied model (and the reverse), the error says which key to set.
- ``doc_segment_id`` (default ``0``: the official code encodes documents as a single sequence, so their
  token_type_ids are 0; the paper's lookup, Eq. 2/4, is word + position embeddings only). ``1`` is this
  project's earlier behaviour (segment B, as in the BERT ranker's pair input). Queries always use 0.

Reuse (Sec. 3.2): ``reuse: s1`` stores D per document, ``reuse: s2`` stores each IB's key/value
projections D W_k, D W_v (Eq. 11-12). Reading an S1 store, the blocks attend over D without projecting it: the
query rows are carried into D's space instead (``attend_states``: the same scores, 3.6x fewer operations for the
cross-attention at BERT-base and 512 tokens). The store is the model's ``store`` artifact of fold scope (it
depends on a fold's trained weights): ``python -m longrank artifacts --scope fold`` builds it through
``build_artifacts`` (:mod:`longrank.models.mores_store`'s format), and ``attach_artifacts`` makes
``score_pairs`` read documents by id. All three paths compute the same scores (tests/test_mores.py). Without a
store, ``score_pairs`` still runs the document module once per distinct document of a job, the paper's reuse within
one rerank (:mod:`longrank.models.modules.kept_documents`; the default run's test rerank: 782 documents for 1,580
pairs), to fp32's rounding of the pairwise forward (tests/test_kept_documents.py).
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn
from transformers import BertModel

from longrank.errors import InputError
from longrank.config.model_types import mores_store
from longrank.models.base import Ranker, config_keys
from longrank.models.modules.cuda_graphs import GraphCache
from longrank.models.modules.doc_attention import DocRows, DocStates, kernel_available
from longrank.models.modules import kept_documents
from longrank.models.modules.half_weights import half_copies, held_half
from longrank.models.modules.residual_norm import fused_norm_available
from longrank.models.modules.encoders import encoder_choice, encoder_layers, from_encoder_config, single_inputs
from longrank.models.mores_interaction import InteractionBlock, fused_layer
from longrank.models.mores_store import ReuseStore, write_store
from longrank.models.mores_tied_layers import drop_tied_query_layers, load_query_layers
from longrank.config.schema import schema_default

log = logging.getLogger(__name__)

DOC_SEGMENT = 0  # default doc_segment_id: documents are a single sequence (segment A), as in the official code
STORE = "store.json"  # the reuse store in a fold's artifact directory (its array: store.npy beside it)


class MORES(Ranker):
    default_loss = "pointwise_bce"
    config_parts = (encoder_choice,)
    parameter_groups = {"scoring": ("head.",)}  # train.scoring_lr: the new score head on a pretrained encoder

    def __init__(
        self,
        encoder,
        tokenizer,
        interaction_blocks: int = 2,
        max_query_len: int = 30,
        max_doc_len: int = 510,
        cross_attention_init: str = "copy",
        reuse: str = "none",
        tie_query_layers: bool = True,
        doc_segment_id: int = DOC_SEGMENT,
    ):
        super().__init__()
        n_layers = len(encoder_layers(encoder))
        if not 1 <= interaction_blocks < n_layers:
            raise InputError(
                f"interaction_blocks: expected 1..{n_layers - 1} for a {n_layers}-layer encoder, got {interaction_blocks!r}"
            )
        if reuse not in {"none", "s1", "s2"}:
            raise InputError(f"reuse: expected 'none', 's1' or 's2', got {reuse!r}")
        if not isinstance(tie_query_layers, bool):
            raise InputError(f"tie_query_layers: expected true or false, got {tie_query_layers!r}")
        n_segments = getattr(encoder.config, "type_vocab_size", 2)
        if (
            isinstance(doc_segment_id, bool)
            or not isinstance(doc_segment_id, int)
            or not 0 <= doc_segment_id < n_segments
        ):
            raise InputError(
                f"doc_segment_id: expected 0..{n_segments - 1} (the encoder's segment ids), got {doc_segment_id!r}"
            )
        max_pos = getattr(encoder.config, "max_position_embeddings", 512)
        if max_doc_len + 2 > max_pos or max_query_len + 2 > max_pos:
            raise InputError(
                f"max_doc_len/max_query_len: + 2 special tokens must fit the encoder's {max_pos} positions"
            )
        self.tokenizer = tokenizer
        self.max_query_len, self.max_doc_len, self.reuse = max_query_len, max_doc_len, reuse
        self.tie_query_layers, self.doc_segment_id = tie_query_layers, doc_segment_id
        self.document_module = copy.deepcopy(encoder)  # copy 1: all L layers
        split = n_layers - interaction_blocks
        layers = encoder_layers(encoder)  # copy 2: embeddings -> query module, last K layers -> IBs
        init_range = getattr(encoder.config, "initializer_range", 0.02)
        self.interaction_blocks = nn.ModuleList(
            InteractionBlock(layer, cross_attention_init, init_range) for layer in layers[split:]
        )
        # query layers: the document module's own first L-K layer objects (tied, official code) or copy 2's (untied)
        query_layers = encoder_layers(self.document_module)[:split] if tie_query_layers else layers[:split]
        encoder.encoder.layer = nn.ModuleList(query_layers)
        encoder.config = copy.deepcopy(encoder.config)
        encoder.config.num_hidden_layers = split
        self.query_module = encoder
        self.head = nn.Linear(encoder.config.hidden_size, 1)
        nn.init.normal_(self.head.weight, std=init_range)
        nn.init.zeros_(self.head.bias)
        self.store: ReuseStore | None = None
        self._kept_documents = kept_documents.KeptDocuments()  # no store: each document represented once a job
        self.register_state_dict_post_hook(drop_tied_query_layers)
        self.register_load_state_dict_pre_hook(load_query_layers)

    @classmethod
    def from_config(cls, params, corpus=None):
        return from_encoder_config(cls, "mores", params)

    # --- tokenisation -------------------------------------------------------------------------------
    def encode_queries(self, queries: list[str]) -> dict[str, torch.Tensor]:
        return single_inputs(self.tokenizer, queries, self.max_query_len, segment=0)

    def encode_docs(self, docs: list[str]) -> dict[str, torch.Tensor]:
        return single_inputs(self.tokenizer, docs, self.max_doc_len, segment=self.doc_segment_id)

    def encode(self, queries, doc_ids, docs):
        q, d = self.encode_queries(queries), self.encode_docs(docs)
        return {**{f"q_{k}": v for k, v in q.items()}, **{f"d_{k}": v for k, v in d.items()}}

    # --- the three modules --------------------------------------------------------------------------
    @property
    def blocks(self) -> Sequence[InteractionBlock]:
        """``interaction_blocks`` as what they are: an ``nn.ModuleList`` types its entries as plain modules."""
        return cast(Sequence[InteractionBlock], self.interaction_blocks)

    @staticmethod
    def device_query_inputs(inputs: dict[str, torch.Tensor], device) -> dict[str, torch.Tensor | None]:
        """Tokenised queries on ``device``. On CUDA a mask of all ones, read on the host, becomes ``None``: the
        query module's CUDA graph and the blocks' query self-attention (SDPA's unmasked kernel) then need no mask,
        and no device sync asks whether there is padding (on an H100 two such syncs per rerank batch left the
        GPU idle while Python prepared the next step). On the CPU the mask stays: its scores as they were."""
        out: dict[str, torch.Tensor | None] = {k: v.to(device) for k, v in inputs.items()}
        if torch.device(device).type == "cuda" and bool(inputs["attention_mask"].all()):
            out["attention_mask"] = None
        return out

    def represent_queries(self, input_ids, attention_mask, token_type_ids) -> torch.Tensor:
        """``attention_mask`` ``None``: no padding (see ``device_query_inputs``)."""
        half = half_copies([self.query_module], input_ids.device)
        around = contextlib.nullcontext if half is None else half.swapped
        if input_ids.device.type == "cuda" and not self.training and not torch.is_grad_enabled():
            # Inference on CUDA: one query of a few tokens is a hundred tiny kernels, replayed as one CUDA graph.
            # Without padding the encoder needs no mask (the graph then holds no host-side check of one).
            if attention_mask is None or bool(attention_mask.all()):
                key = (None if half is None else half.key,)
                return self._graphs("query", self._query_states)(input_ids, token_type_ids, key=key, around=around)
        with around():
            return self.query_module(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    def _query_states(self, input_ids, token_type_ids) -> torch.Tensor:
        """The query module over unpadded queries; at inference on CUDA its layers as ``fused_layer`` (BERT's
        embeddings, then each layer's self-attention and FFN, no pooler: its output is not read)."""
        if not fused_norm_available(input_ids.device) or self.training or not isinstance(self.query_module, BertModel):
            return self.query_module(input_ids=input_ids, token_type_ids=token_type_ids).last_hidden_state
        x = x_half = self.query_module.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
        for layer in encoder_layers(self.query_module):
            x, x_half = fused_layer(layer.attention, layer.intermediate, layer.output, x, x_half, None)
        return x

    def _graphs(self, name: str, fn) -> GraphCache:
        """The CUDA graph cache of one inference step, made on first use (not a module: no weights, not saved)."""
        caches = self.__dict__.setdefault("_graph_caches", {})
        if name not in caches:
            caches[name] = GraphCache(fn)
        return caches[name]

    def represent_docs(self, input_ids, attention_mask, token_type_ids) -> torch.Tensor:
        with held_half([self.document_module], input_ids.device):
            return self.document_module(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    def project_docs(self, doc: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [ib.project_document(doc) for ib in self.blocks]

    def project_rows(self, doc: torch.Tensor, doc_mask: torch.Tensor) -> DocRows:
        """Every block's (D W_k, D W_v) in one matrix product (one [hidden, 2K x hidden] weight: a larger product
        runs nearer the GPU's peak than 2K small ones), as rows for ``forward_rows``."""
        projections = [p for ib in self.blocks for p in (ib.cross_attention.self.key, ib.cross_attention.self.value)]
        weight = torch.cat([p.weight for p in projections])
        bias = torch.cat([p.bias for p in projections])
        return DocRows.from_dense(F.linear(doc, weight, bias), doc_mask, len(self.interaction_blocks))

    def reads_rows(self, device) -> bool:
        """Whether scoring takes the fused path (``forward_rows``): inference on CUDA with Triton; training and the
        CPU take PyTorch's attention over gathered keys and values (the same scores, tests/test_mores.py)."""
        attention = self.blocks[0].cross_attention.self
        return (
            not self.training
            and not torch.is_grad_enabled()
            and kernel_available(torch.device(device), attention.attention_head_size, self.max_query_len + 2)
        )

    def reads_store_rows(self, device) -> bool:
        """Whether inference reads a Reuse-S2 store's rows where they lie (``ReuseStore.doc_kv``): where the fused
        kernel runs, and on the CPU (one SDPA per candidate over views of its rows, no gathered copy)."""
        inference = not self.training and not torch.is_grad_enabled()
        return self.reads_rows(device) or (inference and torch.device(device).type == "cpu")

    def interact(
        self,
        query: torch.Tensor,
        query_mask,
        doc_kv: list[tuple[torch.Tensor, torch.Tensor]] | DocRows | DocStates,
        doc_mask,
    ) -> torch.Tensor:
        half = half_copies([self.interaction_blocks, self.head], query.device)
        around = contextlib.nullcontext if half is None else half.swapped
        if isinstance(doc_kv, DocRows) and doc_kv.resident and query.device.type == "cuda":
            # A resident store: the blocks' kernels replayed as one CUDA graph that reads the store in place (the
            # same tensor on every call: its address is part of the graph's key; the candidates' rows are inputs).
            self._resident_rows = doc_kv
            weights = None if half is None else half.key
            key = (doc_kv.table.data_ptr(), tuple(doc_kv.key_cols), tuple(doc_kv.value_cols), weights)
            return self._graphs("interact", self._interact_resident)(
                query, query_mask, doc_kv.starts, doc_kv.lengths, key=key, around=around
            )
        with around():
            return self._interact(query, query_mask, doc_kv, doc_mask)

    def _interact_resident(self, query, query_mask, starts, lengths) -> torch.Tensor:
        rows = self._resident_rows
        docs = DocRows(rows.table, starts, lengths, rows.key_cols, rows.value_cols, rows.hidden, rows.max_len, True)
        return self._interact(query, query_mask, docs, None)

    def _interact(self, query, query_mask, doc_kv, doc_mask) -> torch.Tensor:
        h = h_half = query
        for k, ib in enumerate(self.blocks):
            if isinstance(doc_kv, DocRows):
                h, h_half = ib.forward_rows(h, h_half, query_mask, doc_kv, k)  # Eq. 8-9
            elif isinstance(doc_kv, DocStates):
                h, h_half = ib.forward_states(h, h_half, query_mask, doc_kv)
            else:
                h = ib(h, query_mask, *doc_kv[k], doc_mask)
        return self.head(h[:, 0]).squeeze(-1)  # Eq. 10

    def forward(self, q_input_ids, q_attention_mask, q_token_type_ids, d_input_ids, d_attention_mask, d_token_type_ids):
        query = self.represent_queries(q_input_ids, q_attention_mask, q_token_type_ids)
        doc = self.represent_docs(d_input_ids, d_attention_mask, d_token_type_ids)
        if self.reads_rows(doc.device):
            return self.interact(query, q_attention_mask, self.project_rows(doc, d_attention_mask), None)
        return self.interact(query, q_attention_mask, self.project_docs(doc), d_attention_mask)

    # --- reranking with precomputed documents -------------------------------------------------------
    @classmethod
    def export_notes(cls, params):
        if not mores_store(params):
            return []
        reuse = params.get("reuse", config_keys(cls.__init__)["reuse"])
        return [
            f"reuse: {reuse}: the Reuse store is a per-collection cache of the document representations; the exported "
            "model computes them from the text (the same scores)"
        ]

    def build_artifacts(
        self, scope, corpus, doc_ids, out_dir, *, batch_size: int = schema_default("rerank.batch_size")
    ) -> None:
        """The reuse store of ``doc_ids`` (this model's ``reuse`` setting and weights) in ``out_dir``."""
        if scope != "fold" or self.reuse not in ("s1", "s2"):
            raise InputError(
                f"mores: reuse {self.reuse!r} has no {scope!r} artifacts (a reuse store needs reuse: s1 or s2)"
            )
        meta = write_store(
            self,
            doc_ids,
            [corpus.docs[d] for d in doc_ids],
            Path(out_dir) / STORE,
            self.reuse,
            batch_size=batch_size,
            device=self.device,
        )
        log.info(
            "stored %d documents (%d tokens), %.3f MB per document on average",
            meta["documents"],
            meta["tokens"],
            meta["mb_per_document_mean"],
        )

    def attach_artifacts(self, directory) -> None:
        """Read documents from the reuse store ``build_artifacts`` wrote into ``directory`` for these weights."""
        self.store = ReuseStore.open(Path(directory) / STORE, self)

    def _document_states(self, docs: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """The document module's states of ``docs`` [B, L, H] and their mask [B, L], padded to the longest as
        ``encode_docs`` pads them. Without a store each distinct document is represented once per reranking job (the
        paper's reuse within a job, :mod:`longrank.models.modules.kept_documents`); its padding rows are zeros, which
        the cross-attention's mask leaves unread."""
        device = self.device
        if not kept_documents.applies(self):
            d = {k: v.to(device) for k, v in self.encode_docs(docs).items()}
            return self.represent_docs(**d), d["attention_mask"]
        states = self._kept_documents.get(self, docs, self._represent_texts)
        lengths = torch.tensor([len(s) for s in states], device=device)
        mask = (torch.arange(int(lengths.max()), device=device)[None, :] < lengths[:, None]).long()
        return torch.nn.utils.rnn.pad_sequence(states, batch_first=True), mask

    def _represent_texts(self, docs: list[str]) -> list[torch.Tensor]:
        """Each document's states over its own tokens [length, H] (a copy: not a view of the padded batch)."""
        d = {k: v.to(self.device) for k, v in self.encode_docs(docs).items()}
        states = self.represent_docs(**d)
        return [s[:n].clone() for s, n in zip(states, d["attention_mask"].sum(dim=1).tolist())]

    @torch.no_grad()
    def score_pairs(self, queries, doc_ids, docs):
        device = self.device
        # The query module runs once per distinct query (Table 1, "Query Representation": once per query).
        distinct = {text: i for i, text in enumerate(dict.fromkeys(queries))}
        q = self.device_query_inputs(self.encode_queries(list(distinct)), device)
        reps, mask = self.represent_queries(**q), q["attention_mask"]
        if len(distinct) == 1:  # one query for every candidate (a rerank batch): a view, no copy per candidate
            query = reps.expand(len(queries), *reps.shape[1:])
            query_mask = None if mask is None else mask.expand(len(queries), *mask.shape[1:])
        else:
            pick = torch.tensor([distinct[text] for text in queries], device=device)
            query, query_mask = reps[pick], None if mask is None else mask[pick]
        if self.store is None:
            doc, doc_mask = self._document_states(docs)
            if self.reads_rows(device):
                return self.interact(query, query_mask, self.project_rows(doc, doc_mask), None)
            return self.interact(query, query_mask, self.project_docs(doc), doc_mask)
        # Under autocast (rerank.precision) the stored rows are read in its half precision, not widened to fp32.
        dtype = torch.get_autocast_dtype(device.type) if torch.is_autocast_enabled(device.type) else torch.float32
        return self.interact(query, query_mask, *self.store.doc_kv(doc_ids, self, device, dtype))
