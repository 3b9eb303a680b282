"""MIR: Fu, Hu, Feng, Dou, Jia, Chen, Yu & Cao, "Leveraging Multi-view Inter-passage Interactions for Neural
Document Ranking" (WSDM 2022).

A document is cut into overlapping passages (the ``graphs`` stage does that, with its pivot tokens and graphs:
see :mod:`longrank.mir_graphs`). Every passage is one sequence ``[CLS] query [SNT] sentence [SNT] sentence ...``:
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

from pathlib import Path
from typing import Any, Protocol, cast

import torch
from torch import nn

from longrank.errors import InputError
from longrank.models.base import Ranker
from longrank.models.modules.encoders import (
    encoder_choice,
    encoder_layers,
    freeze_lower_layers,
    from_encoder_config,
    wordpiece_ids,
)
from longrank.models.mir_inputs import (
    GRAPH_VIEW,
    VIEWS,
    NodeIndex,
    check_encoder,
    check_graph_set,
    check_lengths,
    check_switches,
    adjacency_batch,
    cut_record,
    node_batch,
    passage_batch,
    passages_covering,
    sequence_length,
    view_names,
)
from longrank.models.modules.mir_graph_layer import GraphLayer
from longrank.models.modules.node_pooling import init_linear, node_pooling
from longrank.config.schema import schema_default


class DocumentRecords(Protocol):
    """doc id -> record (the contract's format): a dict, or the graphs stage's ``data.records.GraphStore``."""

    def __getitem__(self, doc_id: str, /) -> dict: ...


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
        graphs: list[str] = ["p2p", "s2s", "t2t"],  # noqa: B006 (see below: never mutated)
        views: list[str] = ["passage", "sentence", "token"],  # noqa: B006
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
        self.graphs, self.views = view_names(graphs, views)
        check_switches(pooling, aggregator, shared, stacked, fully_connected)
        check_lengths(max_doc_tokens, max_query_len, dropout)
        config = encoder.config
        dim, std = config.hidden_size, getattr(config, "initializer_range", 0.02)
        inter_heads = config.num_attention_heads if inter_heads is None else inter_heads
        implementation = check_encoder(config, inter_heads, pool_heads)
        self.encoder, self.tokenizer = encoder, tokenizer
        self.max_query_len, self.max_doc_tokens = max_query_len, max_doc_tokens
        self.pooling, self.aggregator = pooling, aggregator
        self.shared, self.stacked, self.fully_connected = shared, stacked, fully_connected
        self.eager = implementation == "eager"
        n_layers = len(encoder_layers(encoder))
        self._add_inter_layers(n_layers, inter_heads, dropout, std)
        self._add_fusion(n_layers, dim)
        self._add_aggregation(dim, pool_heads, dropout, std)
        freeze_lower_layers(encoder, freeze_layers)
        self.records: DocumentRecords | None = None
        self.settings: dict[str, Any] = {}
        self.source = "graphs"

    def _add_inter_layers(self, n_layers: int, heads: int, dropout: float, std: float) -> None:
        """Inter-passage layers: per block (stacked) or one on top; the last one only for views that are pooled."""
        config = self.encoder.config
        blocks = n_layers if self.stacked else 1
        self.inter_views = [
            [g for g in self.graphs if block < blocks - 1 or GRAPH_VIEW[g] in self.views] for block in range(blocks)
        ]
        self.inter = nn.ModuleList()
        if self.shared:
            return
        for graphs_run in self.inter_views:
            layers = nn.ModuleDict(
                {
                    g: GraphLayer(config.hidden_size, heads, config.intermediate_size, dropout, self.aggregator)
                    for g in graphs_run
                }
            )
            for layer in layers.values():
                init_linear(layer, std)
            self.inter.append(layers)

    def _add_fusion(self, n_layers: int, dim: int) -> None:
        """W^C of Eq. 2 per block but the last (aggregation reads G^L), starting as [I 0]: see the module docstring."""
        self.fuse = nn.ModuleList()
        if not (self.stacked and self.graphs):
            return
        for _ in range(n_layers - 1):
            fuse = nn.Linear(2 * dim, dim)
            with torch.no_grad():
                fuse.weight.zero_()
                fuse.weight[:, :dim].copy_(torch.eye(dim))
                fuse.bias.zero_()
            self.fuse.append(fuse)

    def _add_aggregation(self, dim: int, heads: int, dropout: float, std: float) -> None:
        """The pooling per view (Eq. 10-12), W^A (Eq. 9) and v (Eq. 13)."""
        ff_dim = self.encoder.config.intermediate_size
        self.pool = nn.ModuleDict(
            {view: node_pooling(self.pooling, dim, heads, ff_dim, dropout, std) for view in self.views}
        )
        self.aggregate = nn.Linear(len(self.views) * dim, dim)  # W^A, Eq. 9
        self.score = nn.Linear(dim, 1, bias=False)  # v, Eq. 13
        init_linear(self.aggregate, std)
        init_linear(self.score, std)

    @classmethod
    def from_config(cls, params, corpus=None):
        return from_encoder_config(cls, "mir", params)

    # --- the graphs (collection artifact of the graphs stage) -----------------------------------------
    def build_artifacts(
        self, scope, corpus, doc_ids, out_dir, *, batch_size: int = schema_default("rerank.batch_size")
    ) -> None:
        raise InputError(
            "mir: the graphs stage builds MIR's graphs (mir_graphs in the config), not the model; "
            "attach its directory instead"
        )

    def attach_artifacts(self, directory) -> None:
        """Read each document's record from the graph set in ``directory`` (``longrank.data.records.GraphStore``)."""
        from longrank.data.records import GraphStore

        store = GraphStore(Path(directory))
        self.use_graphs(store, store.settings, source=str(directory))

    def use_graphs(self, records: DocumentRecords, settings: dict[str, Any], source: str = "graphs") -> None:
        """Use ``records`` (doc id -> record, the contract's format) cut with ``settings`` from now on; ``source``
        names them in errors. The graph set must come from this model's tokenizer and hold enough tokens."""
        check_graph_set(settings, self.tokenizer, self.max_doc_tokens, source)
        self.records, self.settings, self.source = records, dict(settings), source

    def passages_read(self, n_passages: int) -> int:
        """How many of a document's first passages cover its first ``max_doc_tokens`` tokens."""
        return passages_covering(self.settings, self.max_doc_tokens, n_passages)

    def document(self, doc_id: str) -> dict[str, Any]:
        """The record of ``doc_id`` cut to ``max_doc_tokens``: ``passages``, nodes per view (passage, positions in
        its ids; a passage node has none) and edges per graph, renumbered; checked against the contract."""
        if self.records is None:
            raise InputError("mir: no graphs attached; the model reads its graphs stage's records (attach_artifacts)")
        try:
            record = self.records[doc_id]
        except KeyError:
            raise InputError(f"document {doc_id!r} has no record in the graph set {self.source}") from None
        return cut_record(record, self.passages_read, self.graphs, f"document {doc_id!r} in {self.source}")

    # --- tokenisation ---------------------------------------------------------------------------------
    def encode(self, queries, doc_ids, docs):
        """[B, P, T] passage sequences ``[CLS] query [SNT] ...`` (segment 0 up to the query's end, 1 from the first
        [SNT]) with ``passage_mask`` [B, P]; per view: ``{view}_tokens`` [B, N, K] (each node's tokens as
        passage * T + position), ``{view}_token_mask``, ``{view}_nodes`` [B, N] (real nodes); per graph: ``{graph}_adj``
        [B, N, N] bool (symmetric, no self loops). ``docs`` (the text) is not read: the graphs hold the tokens."""
        q_ids = wordpiece_ids(self.tokenizer, queries, self.max_query_len)
        records = [self.document(d) for d in doc_ids]
        max_positions = getattr(self.encoder.config, "max_position_embeddings", 512)
        length = sequence_length(q_ids, records, max_positions)
        batch = passage_batch(self.tokenizer, q_ids, records, length)
        for view in self.node_views:
            batch.update(node_batch(view, q_ids, records, length))
        for graph in self.graphs:
            batch[f"{graph}_adj"] = adjacency_batch(graph, records, batch[f"{GRAPH_VIEW[graph]}_nodes"].shape[1])
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
        layers = cast(nn.ModuleDict, self.inter[block])  # each block's graph layers (``_add_inter_layers``)
        return layers[graph](x, adj, mask)

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
        adjacency = self._adjacency(index, nodes)
        if self.graphs and self.fuse:
            pivot_tokens, pivot_nodes = self._pivots(index)
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

    def _adjacency(self, index: dict[str, NodeIndex], nodes: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Each graph's [B, N, N] edges without self loops (all of a document's nodes with ``fully_connected``)."""
        adjacency = {}
        for graph in self.graphs:
            mask = index[GRAPH_VIEW[graph]].mask
            adj = mask[:, :, None] & mask[:, None, :] if self.fully_connected else nodes[f"{graph}_adj"]
            adjacency[graph] = adj & ~torch.eye(adj.shape[-1], dtype=torch.bool, device=adj.device)
        return adjacency

    def _pivots(self, index: dict[str, NodeIndex]) -> tuple[torch.Tensor, torch.Tensor]:
        """The pivot tokens of the graphs' views, once: which packed token each is and which node (numbered across
        the graphs' views in order) it belongs to."""
        offsets = [0]
        for graph in self.graphs[:-1]:
            b, n = index[GRAPH_VIEW[graph]].shape
            offsets.append(offsets[-1] + b * n)
        pivot_tokens = torch.cat([index[GRAPH_VIEW[g]].tokens for g in self.graphs])
        pivot_nodes = torch.cat([index[GRAPH_VIEW[g]].nodes + o for g, o in zip(self.graphs, offsets)])
        return pivot_tokens, pivot_nodes

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
