"""MORES's Interaction Module (:mod:`longrank.models.mores`, Sec. 3.1, Eq. 5-9): the Interaction Blocks, each a
query->document cross-attention, the query's self-attention and an FFN, and the attention they run: over projected
keys and values, over a Reuse-S1 store's unprojected states (``attend_states``), and fused on CUDA (``fused_layer``,
``InteractionBlock.forward_rows``)."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from longrank.errors import InputError
from longrank.models.modules.doc_attention import DocRows, DocStates, attend_own_rows, attend_rows, kernel_available
from longrank.models.modules.residual_norm import fused_norm_available, output_norm


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
