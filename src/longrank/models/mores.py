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
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from transformers import BertModel

from longrank.errors import InputError
from longrank.config.model_types import mores_store
from longrank.models.base import Ranker, config_keys
from longrank.models.modules.cuda_graphs import GraphCache
from longrank.models.modules.doc_attention import DocRows, DocStates, attend_own_rows, attend_rows, kernel_available
from longrank.models.modules import kept_documents
from longrank.models.modules.half_weights import half_copies, held_half
from longrank.models.modules.residual_norm import fused_norm_available, output_norm
from longrank.models.modules.encoders import encoder_choice, encoder_layers, from_encoder_config, single_inputs
from longrank.models.mores_store import ReuseStore, write_store
from longrank.config.schema import schema_default

log = logging.getLogger(__name__)

DOC_SEGMENT = 0  # default doc_segment_id: documents are a single sequence (segment A), as in the official code
QUERY_LAYERS = "query_module.encoder.layer."  # state-dict prefix of the query module's layers (tied: not saved)
DOC_LAYERS = "document_module.encoder.layer."
STORE = "store.json"  # the reuse store in a fold's artifact directory (its array: store.npy beside it)


def _drop_tied_query_layers(module, state_dict, prefix, local_metadata) -> None:
    """state_dict post-hook: a tied layer is saved once, under ``document_module.`` (safetensors refuses two
    names for one storage, and one name per weight is what there is)."""
    if module.tie_query_layers:
        for key in [k for k in state_dict if k.startswith(prefix + QUERY_LAYERS)]:
            del state_dict[key]


def _load_query_layers(
    module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
) -> None:
    """load_state_dict pre-hook. Tied: the query module's layers read the document module's first L-K layers'
    entries. A checkpoint saved with the other ``tie_query_layers`` is refused with the key to set."""
    doc_keys = [k for k in state_dict if k.startswith(prefix + DOC_LAYERS)]
    has_query_layers = any(k.startswith(prefix + QUERY_LAYERS) for k in state_dict)
    if not module.tie_query_layers:
        if doc_keys and not has_query_layers:
            raise InputError(
                "tie_query_layers: the checkpoint was saved with tied query layers (tie_query_layers: true); "
                "set tie_query_layers: true to load it"
            )
        return
    split = len(module.query_module.encoder.layer)
    for key in doc_keys:
        index, rest = key[len(prefix + DOC_LAYERS) :].split(".", 1)
        if int(index) >= split:
            continue
        query_key = f"{prefix}{QUERY_LAYERS}{index}.{rest}"
        if query_key in state_dict and not torch.equal(
            state_dict[query_key].to(state_dict[key].device), state_dict[key]
        ):
            raise InputError(
                "tie_query_layers: the checkpoint has query-module layers of their own (it was saved with "
                "tie_query_layers: false); set tie_query_layers: false to load it"
            )
        state_dict[query_key] = state_dict[key]


def attend(
    attention, x: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, key_mask: torch.Tensor
) -> torch.Tensor:
    """Multi-head attention of ``x`` over projected ``keys``/``values``, then BERT's output projection and
    LN(. + x). ``attention`` is a BertAttention (``.self``: query/key/value/dropout, ``.output``: dense/LN).
    ``key_mask`` ``None``: every key is attended."""
    return attention.output(attention_context(attention.self, x, keys, values, key_mask), x)


def attention_context(attention, x: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, key_mask) -> torch.Tensor:
    """``attend`` before BERT's output projection (``attention``: a BertSelfAttention)."""
    heads = attention.num_attention_heads
    split = lambda t: t.view(t.shape[0], t.shape[1], heads, -1).transpose(1, 2)  # noqa: E731
    context = F.scaled_dot_product_attention(
        split(attention.query(x)),
        split(keys),
        split(values),
        attn_mask=None if key_mask is None else key_mask[:, None, None, :].bool(),
        dropout_p=attention.dropout.p if attention.training else 0.0,
    )
    return context.transpose(1, 2).reshape(x.shape)


def attend_states(attention, x: torch.Tensor, docs: DocStates) -> torch.Tensor:
    """Eq. 5's multi-head attention of ``x`` ``[B, M, hidden]`` over the keys and values D W_k + b_k, D W_v + b_v of
    the documents' states D (``docs``), before BERT's output projection, computed without projecting D. At
    inference: no dropout. ``attention``: a BertSelfAttention (query/key/value).

    Per head h (width w), the scores are q_h (D W_kh + b_kh)^T = (q_h W_kh^T) D^T + q_h b_kh^T, and the last term
    is the same for every key of a query row, so the softmax drops it; its weights P_h sum to 1 along a row, so
    P_h (D W_vh + b_vh) = (P_h D) W_vh + b_vh. Each of the M x heads query rows is carried into the states' space
    (W_kh) and the weighted states out of it (W_vh): per candidate 2 (2 n^2 M + 2 heads M L n) operations instead
    of projecting its L states, 2 (2 n^2 L + 2 n M L). Why: Reuse-S1 reads D from its store, and those
    projections are its online work (Table 4, Reuse-S1): at BERT-base (n 768, 12 heads), 16 query tokens and 512
    document tokens, 0.34 GFLOP instead of 1.23 a block per candidate (MiniLM: 0.16 instead of 0.31). The same
    scores to fp32's rounding (tests/test_mores.py). A query shared by every candidate (an expanded tensor: stride
    0) is carried once, and its scores over all candidates are one matrix product. Where documents are shorter than
    ``carrying_queries_pays`` asks, projecting them costs less (``InteractionBlock.forward_states`` does so)."""
    heads, width = attention.num_attention_heads, attention.attention_head_size
    batch, m, _ = x.shape
    hidden = docs.states.shape[-1]
    rows = x[:1] if x.stride(0) == 0 else x
    q = attention.query(rows).view(len(rows), m, heads, width)
    carried = torch.einsum("bmhw,hwn->bhmn", q, attention.key.weight.view(heads, width, hidden)) * width**-0.5
    carried = carried.reshape(len(rows), heads * m, hidden)
    scores = docs.states @ (carried[0].T if len(rows) == 1 else carried.transpose(1, 2))  # [B, L, heads x M]
    scores = scores.masked_fill(~docs.mask.bool()[:, :, None], float("-inf"))
    pooled = (scores.softmax(dim=1).transpose(1, 2) @ docs.states).view(batch, heads, m, hidden)  # P_h D
    context = torch.einsum("bhmn,hwn->bmhw", pooled, attention.value.weight.view(heads, width, hidden))
    return (context + attention.value.bias.view(heads, width)).reshape(batch, m, heads * width)


def carrying_queries_pays(attention, query_len: int, doc_len: int) -> bool:
    """Whether ``attend_states`` costs fewer operations than projecting ``doc_len`` states (``attention``: a
    BertSelfAttention): n M + heads M L < n L + M L. At 16 query tokens that is from 30 document tokens on with
    MiniLM (n 384, 12 heads), from 21 at BERT-base; at 32 query tokens, from 385 with MiniLM, from 60 at BERT-base."""
    n, heads = attention.query.weight.shape[1], attention.num_attention_heads
    return n * query_len + heads * query_len * doc_len < n * doc_len + query_len * doc_len


def fused_layer(attention, intermediate, output, x, x_half, mask) -> tuple[torch.Tensor, torch.Tensor]:
    """A BERT layer's self-attention and FFN at inference on CUDA (the modules of a BertLayer, or of an interaction
    block's query side), over ``x`` and its half copy ``x_half`` (``x`` outside half autocast); returns the pair.
    Q, K and V are projected in one product; without padding (``mask`` ``None``) the attention runs through the
    cross-attention's kernel over each sequence's own rows (``attend_own_rows``); each sub-layer's add and
    LayerNorm is one kernel that also writes the next linear layer's half input (``output_norm``). Kernels per layer:
    about 12 where HF's modules launch twice as many, which matters where they are tiny (the query module: one query
    of 16 tokens; in a CUDA graph each kernel still costs its launch gap)."""
    sa = attention.self
    projections = (sa.query, sa.key, sa.value)
    qkv = F.linear(x_half, torch.cat([p.weight for p in projections]), torch.cat([p.bias for p in projections]))
    heads = sa.num_attention_heads
    if mask is None and kernel_available(x.device, sa.attention_head_size, x.shape[1]):
        context = attend_own_rows(qkv, heads)
    else:
        split = lambda t: t.view(t.shape[0], t.shape[1], heads, -1).transpose(1, 2)  # noqa: E731
        q, k, v = qkv.chunk(3, dim=-1)
        key_mask = None if mask is None else mask[:, None, None, :].bool()
        context = F.scaled_dot_product_attention(split(q), split(k), split(v), attn_mask=key_mask)
        context = context.transpose(1, 2).reshape(x.shape)
    x, x_half = output_norm(attention.output, context, x)
    return output_norm(output, intermediate(x_half), x)


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
        return self.query_side(x, query_mask)

    def forward_rows(self, h, h_half, query_mask, docs: DocRows, block: int):
        """Eq. 5-7 with the documents' keys and values read where they lie (``docs``: the resident store or the
        document module's projections): no gathered copy, one fused kernel on CUDA. A query shared by every
        candidate (an expanded tensor: stride 0) is projected once. ``h_half``: ``h`` in autocast's half type as the
        previous block left it for this one's first linear layer (or ``h`` itself); returns the pair for the next.

        On CUDA the sub-layers' add and LayerNorm run as one kernel that also writes the next linear layer's half
        input (``output_norm``), and the query tokens' self-attention projects Q, K and V in one product and runs
        through the cross-attention's kernel over their own rows (``attend_own_rows``): the same scores as
        PyTorch's modules within fp32's rounding (tests/test_mores.py), fewer passes over the [B x M, hidden]
        stream. The CPU keeps HF's modules (its scores as they were)."""
        ca = self.cross_attention
        shared = h.stride(0) == 0
        q = ca.self.query(h_half[:1]).expand(h.shape[0], -1, -1) if shared else ca.self.query(h_half)
        return self._after_cross_attention(attend_rows(q, docs, block, ca.self.num_attention_heads), h, query_mask)

    def forward_states(self, h, h_half, query_mask, docs: DocStates):
        """Eq. 5-7 over the documents' states (a Reuse-S1 store's): not projected (``attend_states``) where that
        costs less, else projected as the forward does; as ``forward_rows`` takes and returns ``h`` with its half
        copy."""
        attention = self.cross_attention.self
        if carrying_queries_pays(attention, h.shape[1], docs.states.shape[1]):
            context = attend_states(attention, h_half, docs)
        else:  # short documents
            context = attention_context(attention, h_half, *self.project_document(docs.states), docs.mask)
        return self._after_cross_attention(context, h, query_mask)

    def _after_cross_attention(self, context, h, query_mask):
        """Eq. 5's output projection and LN(. + h), then Eq. 6-7 (fused on CUDA): ``(h, h_half)`` for the next."""
        x, x_half = output_norm(self.cross_attention.output, context, h)
        if not fused_norm_available(x.device):
            x = self.query_side(x, query_mask)
            return x, x
        return fused_layer(self.self_attention, self.intermediate, self.output, x, x_half, query_mask)

    def query_side(self, x, query_mask):
        sa = self.self_attention.self
        x = attend(self.self_attention, x, sa.key(x), sa.value(x), query_mask)  # Eq. 6
        return self.output(self.intermediate(x), x)  # Eq. 7


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
        self.store = None
        self._kept_documents = kept_documents.KeptDocuments()  # no store: each document represented once a job
        self.register_state_dict_post_hook(_drop_tied_query_layers)
        self.register_load_state_dict_pre_hook(_load_query_layers)

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
    @staticmethod
    def device_query_inputs(inputs: dict[str, torch.Tensor], device) -> dict:
        """Tokenised queries on ``device``. On CUDA a mask of all ones, read on the host, becomes ``None``: the
        query module's CUDA graph and the blocks' query self-attention (SDPA's unmasked kernel) then need no mask,
        and no device sync asks whether there is padding (on an H100 two such syncs per rerank batch left the
        GPU idle while Python prepared the next step). On the CPU the mask stays: its scores as they were."""
        out = {k: v.to(device) for k, v in inputs.items()}
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
        return [ib.project_document(doc) for ib in self.interaction_blocks]

    def project_rows(self, doc: torch.Tensor, doc_mask: torch.Tensor) -> DocRows:
        """Every block's (D W_k, D W_v) in one matrix product (one [hidden, 2K x hidden] weight: a larger product
        runs nearer the GPU's peak than 2K small ones), as rows for ``forward_rows``."""
        projections = [
            p for ib in self.interaction_blocks for p in (ib.cross_attention.self.key, ib.cross_attention.self.value)
        ]
        weight = torch.cat([p.weight for p in projections])
        bias = torch.cat([p.bias for p in projections])
        return DocRows.from_dense(F.linear(doc, weight, bias), doc_mask, len(self.interaction_blocks))

    def reads_rows(self, device) -> bool:
        """Whether scoring takes the fused path (``forward_rows``): inference on CUDA with Triton; training and the
        CPU take PyTorch's attention over gathered keys and values (the same scores, tests/test_mores.py)."""
        attention = self.interaction_blocks[0].cross_attention.self
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
        for k, ib in enumerate(self.interaction_blocks):
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
