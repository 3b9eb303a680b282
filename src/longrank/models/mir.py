"""MIR: Fu, Hu, Feng, Dou, Jia, Chen, Yu & Cao, "Leveraging Multi-view Inter-passage Interactions for Neural
Document Ranking" (WSDM 2022).

A document is cut into overlapping passages (the ``graphs`` stage does that, with its pivot tokens and graphs:
see :mod:`longrank.graphs`). Every passage is one sequence ``[CLS] query [SNT] sentence [SNT] sentence ...``:
the paper's [PSG] is BERT's [CLS] and its [SNT] is BERT's [SEP], the pretrained summary and boundary tokens, so
no new embedding starts from scratch. Pivot tokens are nodes of three views: P (each passage's [CLS]), S (each
[SNT]) and T (entity mentions and PRF words; a node's state is the mean of its WordPiece states, Sec. 3.4).

Iterative attention stacks (Sec. 3.2-3.4), one block per pretrained encoder layer l:

- intra-passage: H = layer l over each passage on its own (Eq. 6); all passages of the batch run packed
  together, padding passages never run;
- inter-passage, per enabled graph view v: G_v = a post-LN Transformer layer (Eq. 5) over the view's node
  states whose attention is masked to the graph's edges (Eq. 7-8). New weights per view and block ("two sets
  of projections", Sec. 3.4). The mask is the adjacency plus self loops: a node without edges (a sentence that
  shares no pivot term) must still attend to something, and attending to itself leaves it as the intra
  sub-layer made it rather than an undefined softmax over nothing. Nodes of one document only: nothing crosses
  the batch.
- fusion (Eq. 2): every token of a pivot becomes W^C [h; g] (one W^C per block), other tokens stay h. W^C
  starts as [I 0]: at step 0 the pretrained encoder's states pass unchanged, so the model starts from the
  passage-independent encoder and learns how much of the graph to let in (a random W^C would scramble the
  pretrained states of every pivot token in every layer). The last block has no W^C: aggregation reads G^L.

Aggregation (Sec. 3.5, Eq. 9-12): per view, multi-head attention pooling of the final node states
(G_v^L; a view without a graph pools its intra states) with a learned query w_v; d = W^A [o_P; o_S; o_T];
score = v^T d (Eq. 13). A view without nodes in a document (no T nodes) pools to zeros. Loss: the contrastive
loss over one positive and its negatives (Eq. 13, ``listwise_ce``).

Config keys and the source each default follows:

- ``max_query_len`` (30: this project's BERT-ranker setting; the paper gives none).
- ``max_doc_tokens`` (``None``: the graph set's, 2048 in the paper, Sec. 4.2). A smaller value keeps the first
  1 + ceil((max_doc_tokens - window) / stride) passages, the windows that cover that many tokens (MaxP's count
  over the same tokens), and drops the nodes and edges inside the others: MIR at 512 / 1024 / 2048 tokens
  (Fig. 5) reads one 2048-token graph set.
- ``graphs`` (``["p2p", "s2s", "t2t"]``: the paper's model; subsets are Table 2; ``[]`` is "w/o graph": no
  inter-passage layer at all, the pooled node states are the intra-passage states).
- ``views`` (``["passage", "sentence", "token"]``: Sec. 3.5; subsets are Table 4, middle).
- ``pooling`` (``attention``: Eq. 10-12; ``max``, ``cnn``, ``transformer`` are Table 4, bottom, after PARADE:
  masked element-wise max; one Conv1d of kernel 2 and stride 2, applied until one vector is left; a learned
  [CLS] vector and one Transformer layer over the nodes, its output at [CLS]).
- ``aggregator`` (``attention``: Sec. 3.4; ``gcn``, ``gin``, ``sage`` are Table 3, bottom: torch_geometric's
  dense GCN, GIN (with a two-layer MLP) and GraphSAGE convolutions in the place of the masked multi-head
  attention, inside the same add & norm / FFN layer. The paper's GraphSAGE aggregates with an element-wise
  max; DenseSAGEConv aggregates with the mean).
- ``shared`` (``false``: Sec. 3.4; ``true`` is Table 3's "shared": the inter-passage attention is the intra
  layer itself, run on the node states with the graph mask).
- ``stacked`` (``true``: Sec. 3.2; ``false`` is Table 3's "w/o stacks": the L intra layers first, one
  inter-passage layer on top).
- ``fully_connected`` (``false``: Sec. 3.1.3; ``true`` is Table 3's "full-connected": all nodes of a view of
  one document linked).
- ``inter_heads`` (``None``: the encoder's heads, "consistent with the mechanism in Sec. 3.3").
- ``pool_heads`` (4: this project's choice; the paper does not give h of Eq. 12). Also the heads of the
  ``transformer`` pooling's layer.
- ``dropout`` (0.1: BERT's; the paper gives none) in the new layers; ``freeze_layers`` (0: this project's switch,
  as the BERT ranker's); ``encoder`` (see :mod:`longrank.models.modules.encoders`; the paper's is BERT-base).

Unknown keys are refused by name. The graphs are the model's ``graphs`` artifact of collection scope, built by
the graphs stage (not by ``build_artifacts``) and attached with ``attach_artifacts(directory)``; ``encode`` looks
each document's record up by id and never reads the document's text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from longrank.io import InputError
from longrank.models.base import Ranker
from longrank.models.modules.encoders import (
    encoder_choice,
    encoder_layers,
    freeze_lower_layers,
    from_encoder_config,
    wordpiece_ids,
)
from longrank.models.modules.transformer import EncoderLayer

#: graph -> the node view it links (the record's node list: passages, sentences, tokens)
GRAPH_VIEW = {"p2p": "passage", "s2s": "sentence", "t2t": "token"}
VIEWS = ("passage", "sentence", "token")
POOLINGS = ("attention", "max", "cnn", "transformer")
AGGREGATORS = ("attention", "gcn", "gin", "sage")
#: the settings of a graph set the model reads
NEEDED_SETTINGS = ("window", "overlap", "max_doc_tokens", "cls_id", "sep_id", "vocab_size")


def _init_linear(module: nn.Module, std: float) -> None:
    """BERT's initialisation (normal weights, zero biases) for the new layers beside a pretrained encoder."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


def _names(key: str, value: Any, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """A list of names from ``allowed`` (kept in ``allowed``'s order), or an InputError naming ``key``."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{key}: expected a list of some of {list(allowed)}, got {value!r}")
    unknown = [v for v in value if v not in allowed]
    if unknown or len(set(value)) != len(value):
        raise InputError(f"{key}: expected distinct names among {list(allowed)}, got {list(value)}")
    return tuple(v for v in allowed if v in value)


class GraphLayer(nn.Module):
    """Eq. 5, 7, 8: a post-LN Transformer layer over one view's nodes, O = LN(X + Agg(X, A)),
    G = LN(O + FFN(O)), where Agg is multi-head attention masked to the graph (adjacency + self loops) or, for
    Table 3's aggregators, a dense GCN / GIN / GraphSAGE convolution."""

    def __init__(self, dim: int, heads: int, ff_dim: int, dropout: float, aggregator: str = "attention"):
        super().__init__()
        self.heads, self.dropout, self.aggregator = heads, dropout, aggregator
        if aggregator == "attention":
            self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        else:  # imported here: torch_geometric is only needed by these ablations
            from torch_geometric.nn import DenseGCNConv, DenseGINConv, DenseSAGEConv

            self.conv = {
                "gcn": lambda: DenseGCNConv(dim, dim),
                "gin": lambda: DenseGINConv(nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))),
                "sage": lambda: DenseSAGEConv(dim, dim),
            }[aggregator]()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, ff_dim), nn.GELU(), nn.Dropout(dropout), nn.Linear(ff_dim, dim))
        self.drop1, self.drop2 = nn.Dropout(dropout), nn.Dropout(dropout)

    @staticmethod
    def attend(adj: torch.Tensor) -> torch.Tensor:
        """[B, N, N] adjacency -> [B, 1, N, N] attention mask: the edges and every node's self loop."""
        eye = torch.eye(adj.shape[-1], dtype=torch.bool, device=adj.device)
        return (adj | eye)[:, None]

    def _split(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, n, dim = x.shape
        return self.qkv(x).view(b, n, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)

    def attention_weights(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        """[B, heads, N, N] attention weights of the masked attention (Eq. 7) for node states ``x``: what
        ``forward`` computes inside the fused kernel, spelt out for inspection."""
        q, k, _ = self._split(x)
        logits = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        return logits.masked_fill(~self.attend(adj), float("-inf")).softmax(-1)

    def forward(self, x: torch.Tensor, adj: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x [B, N, E] node states, adj [B, N, N] bool edges (no self loops), mask [B, N] real nodes."""
        if self.aggregator == "attention":
            q, k, v = self._split(x)
            att = F.scaled_dot_product_attention(
                q, k, v, attn_mask=self.attend(adj), dropout_p=self.dropout if self.training else 0.0
            )
            agg = self.out(att.transpose(1, 2).reshape(x.shape))
        else:
            # GCN normalises over the node's own loop (it sets the diagonal itself); GIN and GraphSAGE add the
            # node's own state through their root term, so their adjacency has no loops
            agg = self.conv(x, adj.to(x.dtype), mask)
        x = self.norm1(x + self.drop1(agg))
        return self.norm2(x + self.drop2(self.ff(x)))


class AttentionPooling(nn.Module):
    """Eq. 10-12: multi-head pooling with a learned query w_v: o = W^O [o_1; ...; o_h],
    o_i = (G W_i^V)^T softmax(G W_i^K W_i^Q w_v) (Eq. 11 has no 1/sqrt(d) scale, so neither does this)."""

    def __init__(self, dim: int, heads: int, std: float):
        super().__init__()
        self.heads = heads
        self.w = nn.Parameter(torch.randn(dim) * std)
        self.query, self.key, self.value, self.out = (nn.Linear(dim, dim) for _ in range(4))
        _init_linear(self, std)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, n, dim = x.shape
        split = lambda t: t.view(t.shape[0], -1, self.heads, dim // self.heads).transpose(1, 2)  # noqa: E731
        q = split(self.query(self.w).view(1, 1, dim)).expand(b, -1, -1, -1)
        pooled = F.scaled_dot_product_attention(
            q, split(self.key(x)), split(self.value(x)), attn_mask=mask[:, None, None, :], scale=1.0
        )
        return self.out(pooled.transpose(1, 2).reshape(b, dim))


class MaxPooling(nn.Module):
    """Table 4's MIR-Max: the element-wise max over a view's nodes."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return x.masked_fill(~mask[..., None], float("-inf")).max(dim=1).values


class CNNPooling(nn.Module):
    """Table 4's MIR-CNN, after PARADE-CNN: Conv1d (kernel 2, stride 2) + ReLU halves the nodes until one vector
    is left. One layer's weights serve every level, since the number of nodes (and so of levels) varies by view
    and document; padding nodes and the padding up to a power of two are zeros."""

    def __init__(self, dim: int):
        super().__init__()
        self.conv = nn.Conv1d(dim, dim, kernel_size=2, stride=2)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = (x * mask[..., None].to(x.dtype)).transpose(1, 2)  # [B, E, N]
        width = 2 ** max(1, math.ceil(math.log2(max(x.shape[-1], 1))))
        x = F.pad(x, (0, width - x.shape[-1]))
        while x.shape[-1] > 1:
            x = F.relu(self.conv(x))
        return x[..., 0]


class TransformerPooling(nn.Module):
    """Table 4's MIR-Transformer, after PARADE-Transformer: a learned [CLS] vector before the nodes, one
    Transformer layer over them, its output at [CLS]."""

    def __init__(self, dim: int, heads: int, ff_dim: int, dropout: float, std: float):
        super().__init__()
        self.cls = nn.Parameter(torch.randn(dim) * std)
        self.layer = EncoderLayer(dim, heads, ff_dim, dropout)
        _init_linear(self.layer, std)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = torch.cat([self.cls.to(x.dtype).expand(x.shape[0], 1, -1), x], dim=1)
        attend = torch.cat([mask.new_ones(mask.shape[0], 1), mask], dim=1)[:, None, None, :]
        return self.layer(x, attend)[:, 0]


class NodeIndex:
    """Where one view's nodes sit among the packed token states [n_passages * T, E]: the tokens of every real
    node (``tokens``), the flat node [B * N] each belongs to (``nodes``) and each node's token count."""

    def __init__(
        self, tokens: torch.Tensor, token_mask: torch.Tensor, mask: torch.Tensor, rank: torch.Tensor, length: int
    ):
        b, n, k = tokens.shape
        self.shape, self.mask = (b, n), mask
        valid = (token_mask & mask[..., None]).reshape(-1)
        passage, position = tokens // length, tokens % length  # document-local passage, position in its sequence
        packed = rank.gather(1, passage.reshape(b, -1)).reshape(-1) * length + position.reshape(-1)
        keep = valid.nonzero().squeeze(1)
        self.tokens, self.nodes = packed[keep], keep // k
        self.counts = (token_mask & mask[..., None]).sum(-1).clamp(min=1).reshape(-1, 1)

    def states(self, h: torch.Tensor) -> torch.Tensor:
        """[B, N, E] node states: the mean of each node's token states (a padding node's: zeros)."""
        total = h.new_zeros(self.shape[0] * self.shape[1], h.shape[-1]).index_add(0, self.nodes, h[self.tokens])
        return (total / self.counts.to(h.dtype)).view(*self.shape, -1)


class MIR(Ranker):
    default_loss = "listwise_ce"  # Eq. 13: contrastive over one positive and its negatives
    config_parts = (encoder_choice,)
    # train.scoring_lr: the aggregation head only (pooling, W^A, v), as the BERT ranker's new head. The inter-passage
    # layers and W^C learn at the encoder's rate, as the paper trains everything (one rate, Sec. 4.2): they act inside
    # the encoder (W^C rewrites pivot tokens in every layer), and at the head's 1e-3 they scrambled its states. On
    # Cranfield's title pseudo-queries (60 steps of 4, held-out MRR@10 over BM25's top 10; chance 0.29) MIR stayed
    # at chance (0.315) with them in this group and reached 0.471 without (BERT-FirstP: 0.467).
    parameter_groups = {"scoring": ("pool.", "aggregate.", "score.")}

    def __init__(
        self,
        encoder,
        tokenizer,
        max_query_len: int = 30,
        max_doc_tokens: int | None = None,
        graphs: list[str] = ["p2p", "s2s", "t2t"],
        views: list[str] = ["passage", "sentence", "token"],
        pooling: str = "attention",
        aggregator: str = "attention",
        shared: bool = False,
        stacked: bool = True,
        fully_connected: bool = False,
        inter_heads: int | None = None,
        pool_heads: int = 4,
        dropout: float = 0.1,
        freeze_layers: int = 0,
    ):
        # graphs and views default to lists, as a config spells them (so an entry that spells the defaults out equals
        # them); they are read into tuples, never mutated
        super().__init__()
        self.graphs = _names("graphs", graphs, tuple(GRAPH_VIEW))
        self.views = _names("views", views, VIEWS)
        if not self.views:
            raise InputError("views: expected at least one of " + str(list(VIEWS)) + "; the score is pooled over them")
        if pooling not in POOLINGS:
            raise InputError(f"pooling: expected one of {list(POOLINGS)}, got {pooling!r}")
        if aggregator not in AGGREGATORS:
            raise InputError(f"aggregator: expected one of {list(AGGREGATORS)}, got {aggregator!r}")
        for key, value in (("shared", shared), ("stacked", stacked), ("fully_connected", fully_connected)):
            if not isinstance(value, bool):
                raise InputError(f"{key}: expected true or false, got {value!r}")
        if shared and aggregator != "attention":
            raise InputError(
                f"shared: true shares the intra layer's attention; it cannot go with aggregator {aggregator!r}"
            )
        if max_doc_tokens is not None and (
            isinstance(max_doc_tokens, bool) or not isinstance(max_doc_tokens, int) or max_doc_tokens <= 0
        ):
            raise InputError(
                f"max_doc_tokens: expected a positive number of tokens or null (the graph set's), got {max_doc_tokens!r}"
            )
        if not isinstance(max_query_len, int) or max_query_len < 0:
            raise InputError(f"max_query_len: expected a non-negative integer, got {max_query_len!r}")
        if not 0 <= dropout < 1:
            raise InputError(f"dropout: expected a probability in [0, 1), got {dropout!r}")
        config = encoder.config
        dim, std = config.hidden_size, getattr(config, "initializer_range", 0.02)
        inter_heads = config.num_attention_heads if inter_heads is None else inter_heads
        for key, heads in (("inter_heads", inter_heads), ("pool_heads", pool_heads)):
            if isinstance(heads, bool) or not isinstance(heads, int) or heads <= 0 or dim % heads:
                raise InputError(
                    f"{key}: expected a positive divisor of the encoder's hidden size {dim}, got {heads!r}"
                )
        implementation = getattr(config, "_attn_implementation", "eager")
        if implementation not in ("eager", "sdpa"):
            raise InputError(
                f"encoder: MIR masks attention itself and supports the eager and sdpa attention implementations, not {implementation!r}"
            )
        self.encoder, self.tokenizer = encoder, tokenizer
        self.max_query_len, self.max_doc_tokens = max_query_len, max_doc_tokens
        self.pooling, self.aggregator = pooling, aggregator
        self.shared, self.stacked, self.fully_connected = shared, stacked, fully_connected
        self.eager = implementation == "eager"
        n_layers = len(encoder_layers(encoder))
        # inter-passage layers: per block (stacked) or one on top; the last one only for views that are pooled
        blocks = n_layers if stacked else 1
        self.inter_views = [
            [g for g in self.graphs if block < blocks - 1 or GRAPH_VIEW[g] in self.views] for block in range(blocks)
        ]
        self.inter = nn.ModuleList()
        if not shared:
            for graphs_run in self.inter_views:
                layers = nn.ModuleDict(
                    {g: GraphLayer(dim, inter_heads, config.intermediate_size, dropout, aggregator) for g in graphs_run}
                )
                for layer in layers.values():
                    _init_linear(layer, std)
                self.inter.append(layers)
        # W^C of Eq. 2 per block but the last (aggregation reads G^L), starting as [I 0]: see the module docstring
        self.fuse = nn.ModuleList()
        if stacked and self.graphs:
            for _ in range(n_layers - 1):
                fuse = nn.Linear(2 * dim, dim)
                with torch.no_grad():
                    fuse.weight.zero_()
                    fuse.weight[:, :dim].copy_(torch.eye(dim))
                    fuse.bias.zero_()
                self.fuse.append(fuse)
        pool = {
            "attention": lambda: AttentionPooling(dim, pool_heads, std),
            "max": MaxPooling,
            "cnn": lambda: CNNPooling(dim),
            "transformer": lambda: TransformerPooling(dim, pool_heads, config.intermediate_size, dropout, std),
        }[pooling]
        self.pool = nn.ModuleDict({view: pool() for view in self.views})
        self.aggregate = nn.Linear(len(self.views) * dim, dim)  # W^A, Eq. 9
        self.score = nn.Linear(dim, 1, bias=False)  # v, Eq. 13
        _init_linear(self.aggregate, std)
        _init_linear(self.score, std)
        freeze_lower_layers(encoder, freeze_layers)
        self.records: Mapping[str, dict] | None = None
        self.settings: dict[str, Any] = {}
        self.source = "graphs"

    @classmethod
    def from_config(cls, params, corpus=None):
        return from_encoder_config(cls, "mir", params)

    # --- the graphs (collection artifact of the graphs stage) -----------------------------------------
    @classmethod
    def artifacts(cls, params):
        """Every MIR needs its graph set (even ``graphs: []``: the nodes the views pool are in it)."""
        return {"graphs": "collection"}

    def build_artifacts(self, scope, corpus, doc_ids, out_dir, *, batch_size: int = 32) -> None:
        raise InputError(
            "mir: the graphs stage builds MIR's graphs (mir_graphs in the config), not the model; "
            "attach its directory instead"
        )

    def attach_artifacts(self, directory) -> None:
        """Read each document's record from the graph set in ``directory`` (``longrank.data.records.GraphStore``)."""
        from longrank.data.records import GraphStore

        store = GraphStore(Path(directory))
        self.use_graphs(store, store.settings, source=str(directory))

    def use_graphs(self, records: Mapping[str, dict], settings: dict[str, Any], source: str = "graphs") -> None:
        """Use ``records`` (doc id -> record, the contract's format) cut with ``settings`` from now on; ``source``
        names them in errors. The graph set must come from this model's tokenizer and hold enough tokens."""
        missing = [k for k in NEEDED_SETTINGS if k not in settings]
        if missing:
            raise InputError(f"{source}: the graph set's settings lack {missing}")
        tok = self.tokenizer
        theirs = {k: settings[k] for k in ("cls_id", "sep_id", "vocab_size")}
        ours = {"cls_id": tok.cls_token_id, "sep_id": tok.sep_token_id, "vocab_size": tok.vocab_size}
        if theirs != ours:
            raise InputError(
                f"{source}: the graphs were cut with another tokenizer ({theirs}) than the model's encoder's ({ours}); "
                "build the graph set with the model's encoder"
            )
        if self.max_doc_tokens is not None and self.max_doc_tokens > settings["max_doc_tokens"]:
            raise InputError(
                f"max_doc_tokens: {self.max_doc_tokens} is more than the {settings['max_doc_tokens']} tokens the graph set "
                f"{source} read; build one with max_doc_tokens >= {self.max_doc_tokens}"
            )
        self.records, self.settings, self.source = records, dict(settings), source

    def passages_read(self, n_passages: int) -> int:
        """How many of a document's first passages cover its first ``max_doc_tokens`` tokens."""
        if self.max_doc_tokens is None:
            return n_passages
        window = self.settings["window"]
        stride = max(1, round(window * (1 - self.settings["overlap"])))
        return min(n_passages, 1 + math.ceil(max(self.max_doc_tokens - window, 0) / stride))

    def document(self, doc_id: str) -> dict[str, Any]:
        """The record of ``doc_id`` cut to ``max_doc_tokens``: ``passages``, nodes per view (passage, positions in
        its ids; a passage node has none) and edges per graph, renumbered; checked against the contract."""
        if self.records is None:
            raise InputError("mir: no graphs attached; the model reads its graphs stage's records (attach_artifacts)")
        try:
            record = self.records[doc_id]
        except KeyError:
            raise InputError(f"document {doc_id!r} has no record in the graph set {self.source}") from None
        try:
            passages = [list(p) for p in record["passages"]]
            n_keep = self.passages_read(len(passages))
            found = {
                "passage": [(p, []) for p in range(len(passages))],
                "sentence": [(p, [pos]) for p, pos in record["sentences"]],
                "token": [(p, list(pos)) for p, pos in record["tokens"]],
            }
            nodes, renumber = {}, {}
            for view, listed in found.items():
                if any(not 0 <= p < len(passages) for p, _ in listed):
                    raise ValueError(f"a {view} node names a passage outside 0..{len(passages) - 1}")
                kept = [i for i, (p, _) in enumerate(listed) if p < n_keep]
                renumber[view] = {old: new for new, old in enumerate(kept)}
                nodes[view] = [listed[i] for i in kept]
            edges = {}
            for graph in self.graphs:
                new = renumber[GRAPH_VIEW[graph]]
                n_nodes = len(found[GRAPH_VIEW[graph]])
                pairs = [(int(i), int(j)) for i, j in record["edges"][graph]]
                if any(not (0 <= i < n_nodes and 0 <= j < n_nodes) or i == j for i, j in pairs):
                    raise ValueError(f"{graph} edges name nodes outside 0..{n_nodes - 1} or self loops")
                edges[graph] = [(new[i], new[j]) for i, j in pairs if i in new and j in new]
        except (KeyError, TypeError, ValueError) as err:
            raise InputError(
                f"document {doc_id!r} in {self.source}: not a record of the MIR graphs contract ({type(err).__name__}: {err})"
            ) from None
        passages = passages[:n_keep]
        if not passages:
            raise InputError(f"document {doc_id!r} in {self.source}: a record has at least one passage")
        pivots: set[tuple[int, int]] = set()
        for view in ("sentence", "token"):
            for p, positions in nodes[view]:
                if not positions or any(not 0 <= pos < len(passages[p]) for pos in positions):
                    raise InputError(
                        f"document {doc_id!r} in {self.source}: a {view} node's positions {positions} are outside passage {p}"
                    )
                if pivots & {(p, pos) for pos in positions}:
                    raise InputError(
                        f"document {doc_id!r} in {self.source}: a token of passage {p} belongs to two nodes"
                    )
                pivots |= {(p, pos) for pos in positions}
        return {"passages": passages, "nodes": nodes, "edges": edges}

    # --- tokenisation ---------------------------------------------------------------------------------
    def encode(self, queries, doc_ids, docs):
        """[B, P, T] passage sequences ``[CLS] query [SNT] ...`` (segment 0 up to the query's end, 1 from the first
        [SNT]) with ``passage_mask`` [B, P]; per view: ``{view}_tokens`` [B, N, K] (each node's tokens as
        passage * T + position), ``{view}_token_mask``, ``{view}_nodes`` [B, N] (real nodes); per graph: ``{graph}_adj``
        [B, N, N] bool (symmetric, no self loops). ``docs`` (the text) is not read: the graphs hold the tokens."""
        tok = self.tokenizer
        q_ids = wordpiece_ids(tok, queries, self.max_query_len)
        records = [self.document(d) for d in doc_ids]
        max_pos = getattr(self.encoder.config, "max_position_embeddings", 512)
        length = max(1 + len(q) + len(p) for q, r in zip(q_ids, records) for p in r["passages"])
        if length > max_pos:
            raise InputError(
                f"mir: a passage sequence of {length} tokens (query and [SNT] markers included) exceeds the encoder's "
                f"{max_pos} positions; build the graph set with a smaller window or lower max_query_len"
            )
        n_docs, n_pass = len(records), max(len(r["passages"]) for r in records)
        shape = (n_docs, n_pass, length)
        input_ids = torch.full(shape, tok.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros(shape, dtype=torch.long)
        token_type_ids = torch.zeros(shape, dtype=torch.long)
        passage_mask = torch.zeros(shape[:2], dtype=torch.bool)
        for b, (q, record) in enumerate(zip(q_ids, records)):
            for p, ids in enumerate(record["passages"]):
                seq = [tok.cls_token_id, *q, *ids]
                input_ids[b, p, : len(seq)] = torch.tensor(seq)
                attention_mask[b, p, : len(seq)] = 1
                token_type_ids[b, p, 1 + len(q) : len(seq)] = 1
                passage_mask[b, p] = True
        batch = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "token_type_ids": token_type_ids,
            "passage_mask": passage_mask,
        }
        for view in self.node_views:
            nodes = [r["nodes"][view] for r in records]
            n_nodes = max(1, max(map(len, nodes)))
            width = max(1, max((len(pos) for doc in nodes for _, pos in doc), default=1))
            tokens = torch.zeros(n_docs, n_nodes, width, dtype=torch.long)
            token_mask = torch.zeros(n_docs, n_nodes, width, dtype=torch.bool)
            for b, (q, doc) in enumerate(zip(q_ids, nodes)):
                for i, (p, positions) in enumerate(doc):
                    # a passage node is its [CLS] (position 0); the others sit after [CLS] and the query
                    seq_positions = [0] if view == "passage" else [1 + len(q) + pos for pos in positions]
                    tokens[b, i, : len(seq_positions)] = torch.tensor(seq_positions) + p * length
                    token_mask[b, i, : len(seq_positions)] = True
            batch[f"{view}_tokens"], batch[f"{view}_token_mask"] = tokens, token_mask
            batch[f"{view}_nodes"] = token_mask[..., 0]
        for graph in self.graphs:
            n_nodes = batch[f"{GRAPH_VIEW[graph]}_nodes"].shape[1]
            adj = torch.zeros(n_docs, n_nodes, n_nodes, dtype=torch.bool)
            for b, record in enumerate(records):
                if record["edges"][graph]:
                    i, j = torch.tensor(record["edges"][graph]).T
                    adj[b, i, j] = adj[b, j, i] = True
            batch[f"{graph}_adj"] = adj
        return batch

    @property
    def node_views(self) -> tuple[str, ...]:
        """The views whose nodes the model reads: those it pools and those its graphs link."""
        return tuple(v for v in VIEWS if v in self.views or v in {GRAPH_VIEW[g] for g in self.graphs})

    # --- the iterative attention stacks (Sec. 3.2-3.4) -----------------------------------------------
    def _mask(self, allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """A BERT layer's attention mask from a bool [.., 1 or Q, K] (True: may attend): sdpa takes it as is,
        eager adds it to the logits."""
        if not self.eager:
            return allowed
        return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(
            ~allowed, torch.finfo(dtype).min
        )

    def _graph(
        self, block: int, graph: str, layer: nn.Module, x: torch.Tensor, adj: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        """G_v of one block (Eq. 8): the view's own layer, or with ``shared`` the intra layer itself."""
        if self.shared:
            return layer(x, attention_mask=self._mask(GraphLayer.attend(adj), x.dtype))
        return self.inter[block][graph](x, adj, mask)

    def node_states(
        self, input_ids, attention_mask, token_type_ids, passage_mask, **nodes
    ) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """The final node states of every pooled view: view -> ([B, N, E], mask [B, N]); G_v^L where the view has a
        graph, else the intra-passage states of its nodes."""
        n_docs, n_pass, length = input_ids.shape
        keep = passage_mask.reshape(-1)
        flat = lambda t: t.reshape(-1, length)[keep]  # noqa: E731 - packed: padding passages never run
        h = self.encoder.embeddings(input_ids=flat(input_ids), token_type_ids=flat(token_type_ids))
        token_mask = self._mask(flat(attention_mask).bool()[:, None, None, :], h.dtype)
        rank = (keep.long().cumsum(0) - 1).view(n_docs, n_pass)  # packed row of each (document, passage)
        index = {
            view: NodeIndex(nodes[f"{view}_tokens"], nodes[f"{view}_token_mask"], nodes[f"{view}_nodes"], rank, length)
            for view in self.node_views
        }
        adjacency = {}
        for graph in self.graphs:
            mask = index[GRAPH_VIEW[graph]].mask
            adj = mask[:, :, None] & mask[:, None, :] if self.fully_connected else nodes[f"{graph}_adj"]
            adjacency[graph] = adj & ~torch.eye(adj.shape[-1], dtype=torch.bool, device=adj.device)
        if self.graphs and self.fuse:
            # the pivot tokens of the graphs' views, once: which packed token each is and which node it belongs to
            offsets = [0]
            for graph in self.graphs[:-1]:
                b, n = index[GRAPH_VIEW[graph]].shape
                offsets.append(offsets[-1] + b * n)
            pivot_tokens = torch.cat([index[GRAPH_VIEW[g]].tokens for g in self.graphs])
            pivot_nodes = torch.cat([index[GRAPH_VIEW[g]].nodes + o for g, o in zip(self.graphs, offsets)])
        layers = encoder_layers(self.encoder)
        graph_states: dict[str, torch.Tensor] = {}
        for i, layer in enumerate(layers):
            h = layer(h, attention_mask=token_mask)  # Eq. 6, each passage on its own
            block = i if self.stacked else 0
            if not self.stacked and i < len(layers) - 1:
                continue
            states = h.reshape(-1, h.shape[-1])
            graph_states = {
                g: self._graph(
                    block, g, layer, index[GRAPH_VIEW[g]].states(states), adjacency[g], index[GRAPH_VIEW[g]].mask
                )
                for g in self.inter_views[block]
            }
            if i < len(self.fuse):  # Eq. 2: fuse each pivot's node state into its tokens
                g_flat = torch.cat([graph_states[g].reshape(-1, h.shape[-1]) for g in self.graphs])
                fused = self.fuse[i](torch.cat([states[pivot_tokens], g_flat[pivot_nodes].to(states.dtype)], dim=-1))
                h = states.index_copy(0, pivot_tokens, fused.to(states.dtype)).view_as(h)
        states = h.reshape(-1, h.shape[-1])
        graphed = {GRAPH_VIEW[g]: graph_states[g] for g in graph_states}
        return {
            view: (graphed[view] if view in graphed else index[view].states(states), index[view].mask)
            for view in self.views
        }

    # --- multi-view aggregation (Sec. 3.5) -----------------------------------------------------------
    def pool_views(self, states: dict[str, tuple[torch.Tensor, torch.Tensor]]) -> dict[str, torch.Tensor]:
        """o_v [B, E] per view (Eq. 10-12); zeros for a document without nodes of that view."""
        pooled = {}
        for view in self.views:
            x, mask = states[view]
            has_nodes = mask.any(dim=1, keepdim=True)
            # a document without nodes pools over a stand-in node, then is zeroed: no softmax over nothing
            safe = mask | (~has_nodes & (torch.arange(mask.shape[1], device=mask.device) == 0))
            pooled[view] = self.pool[view](x, safe) * has_nodes.to(x.dtype)
        return pooled

    def document_vector(self, pooled: dict[str, torch.Tensor]) -> torch.Tensor:
        """d = W^A [o_P; o_S; o_T] (Eq. 9), [B, E]."""
        return self.aggregate(torch.cat([pooled[view] for view in self.views], dim=-1))

    def aggregate_scores(self, states: dict[str, tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        """score = v^T d (Eq. 13), [B]."""
        return self.score(self.document_vector(self.pool_views(states))).squeeze(-1)

    def forward(self, input_ids, attention_mask, token_type_ids, passage_mask, **nodes):
        return self.aggregate_scores(self.node_states(input_ids, attention_mask, token_type_ids, passage_mask, **nodes))
