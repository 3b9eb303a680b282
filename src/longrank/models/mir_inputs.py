"""What MIR (:mod:`longrank.models.mir`) checks and reads before its forward pass: its settings, a graph set's
settings against the model, a record cut to the passages the model reads and checked against the contract
(:mod:`longrank.mir_graphs.graphs` writes it), a batch of records as tensors, and where a batch's nodes sit among the
packed token states."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from longrank.errors import InputError
from longrank.models.modules.node_pooling import POOLINGS
from longrank.data.mir_graph_settings import GraphSetSettings

#: graph -> the node view it links (the record's node list: passages, sentences, tokens)
GRAPH_VIEW = {"p2p": "passage", "s2s": "sentence", "t2t": "token"}
VIEWS = ("passage", "sentence", "token")
AGGREGATORS = ("attention", "gcn", "gin", "sage")
#: the settings of a graph set the model reads
NEEDED_SETTINGS = ("window", "overlap", "max_doc_tokens", "cls_id", "sep_id", "vocab_size")


def _names(key: str, value: Any, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """A list of names from ``allowed`` (kept in ``allowed``'s order), or an InputError naming ``key``."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{key}: expected a list of some of {list(allowed)}, got {value!r}")
    unknown = [v for v in value if v not in allowed]
    if unknown or len(set(value)) != len(value):
        raise InputError(f"{key}: expected distinct names among {list(allowed)}, got {list(value)}")
    return tuple(v for v in allowed if v in value)


def view_names(graphs: Any, views: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The ``graphs`` and ``views`` keys as tuples in their canonical order; at least one view."""
    graphs, views = _names("graphs", graphs, tuple(GRAPH_VIEW)), _names("views", views, VIEWS)
    if not views:
        raise InputError("views: expected at least one of " + str(list(VIEWS)) + "; the score is pooled over them")
    return graphs, views


def check_switches(pooling: Any, aggregator: Any, shared: Any, stacked: Any, fully_connected: Any) -> None:
    """The ablation switches: known pooling and aggregator, booleans, ``shared`` only with attention."""
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


def check_lengths(max_doc_tokens: Any, max_query_len: Any, dropout: Any) -> None:
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


def check_encoder(config, inter_heads: Any, pool_heads: Any) -> str:
    """Heads that divide the encoder's width, and an attention implementation MIR can mask; returns the latter."""
    dim = config.hidden_size
    for key, heads in (("inter_heads", inter_heads), ("pool_heads", pool_heads)):
        if isinstance(heads, bool) or not isinstance(heads, int) or heads <= 0 or dim % heads:
            raise InputError(f"{key}: expected a positive divisor of the encoder's hidden size {dim}, got {heads!r}")
    implementation = getattr(config, "_attn_implementation", "eager")
    if implementation not in ("eager", "sdpa"):
        raise InputError(
            f"encoder: MIR masks attention itself and supports the eager and sdpa attention implementations, not {implementation!r}"
        )
    return implementation


def check_graph_set(settings: dict[str, Any], tokenizer, max_doc_tokens: int | None, source: str) -> None:
    """A graph set's ``settings`` suit the model: cut with its tokenizer, from at least ``max_doc_tokens`` tokens."""
    missing = [k for k in NEEDED_SETTINGS if k not in settings]
    if missing:
        raise InputError(f"{source}: the graph set's settings lack {missing}")
    theirs = {k: settings[k] for k in ("cls_id", "sep_id", "vocab_size")}
    ours = {"cls_id": tokenizer.cls_token_id, "sep_id": tokenizer.sep_token_id, "vocab_size": tokenizer.vocab_size}
    if theirs != ours:
        raise InputError(
            f"{source}: the graphs were cut with another tokenizer ({theirs}) than the model's encoder's ({ours}); "
            "build the graph set with the model's encoder"
        )
    if max_doc_tokens is not None and max_doc_tokens > settings["max_doc_tokens"]:
        raise InputError(
            f"max_doc_tokens: {max_doc_tokens} is more than the {settings['max_doc_tokens']} tokens the graph set "
            f"{source} read; build one with max_doc_tokens >= {max_doc_tokens}"
        )


def passages_covering(settings: dict[str, Any], max_doc_tokens: int | None, n_passages: int) -> int:
    """How many of a document's first passages (windows of the graph set's ``settings``) cover its first
    ``max_doc_tokens`` tokens."""
    if max_doc_tokens is None:
        return n_passages
    windows = GraphSetSettings.from_json(settings)
    return min(n_passages, 1 + math.ceil(max(max_doc_tokens - windows.window, 0) / windows.stride))


def cut_record(
    record: dict, passages_read: Callable[[int], int], graphs: tuple[str, ...], where: str
) -> dict[str, Any]:
    """``record`` cut to its first ``passages_read(n_passages)`` passages: ``passages``, nodes per view (passage,
    positions in its ids; a passage node has none) and edges per graph, renumbered; checked against the contract.
    ``where`` names the document in errors."""
    try:
        passages = [list(p) for p in record["passages"]]
        n_keep = passages_read(len(passages))
        found = {
            "passage": [(p, []) for p in range(len(passages))],
            "sentence": [(p, [pos]) for p, pos in record["sentences"]],
            "token": [(p, list(pos)) for p, pos in record["tokens"]],
        }
        nodes, renumber = _kept_nodes(found, len(passages), n_keep)
        edges = {
            graph: _kept_edges(
                record["edges"][graph], graph, len(found[GRAPH_VIEW[graph]]), renumber[GRAPH_VIEW[graph]]
            )
            for graph in graphs
        }
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(f"{where}: not a record of the MIR graphs contract ({type(err).__name__}: {err})") from None
    passages = passages[:n_keep]
    if not passages:
        raise InputError(f"{where}: a record has at least one passage")
    _check_pivots(nodes, passages, where)
    return {"passages": passages, "nodes": nodes, "edges": edges}


def _kept_nodes(found: dict[str, list], n_passages: int, n_keep: int) -> tuple[dict[str, list], dict[str, dict]]:
    """Per view, the nodes of the first ``n_keep`` passages and each kept node's new number (old -> new)."""
    nodes, renumber = {}, {}
    for view, listed in found.items():
        if any(not 0 <= p < n_passages for p, _ in listed):
            raise ValueError(f"a {view} node names a passage outside 0..{n_passages - 1}")
        kept = [i for i, (p, _) in enumerate(listed) if p < n_keep]
        renumber[view] = {old: new for new, old in enumerate(kept)}
        nodes[view] = [listed[i] for i in kept]
    return nodes, renumber


def _kept_edges(listed: list, graph: str, n_nodes: int, new: dict[int, int]) -> list[tuple[int, int]]:
    """The edges of ``graph`` between kept nodes, renumbered; a node outside the view or a self loop is an error."""
    pairs = [(int(i), int(j)) for i, j in listed]
    if any(not (0 <= i < n_nodes and 0 <= j < n_nodes) or i == j for i, j in pairs):
        raise ValueError(f"{graph} edges name nodes outside 0..{n_nodes - 1} or self loops")
    return [(new[i], new[j]) for i, j in pairs if i in new and j in new]


def _check_pivots(nodes: dict[str, list], passages: list[list[int]], where: str) -> None:
    """Every sentence and token node lies inside its passage, and no token belongs to two nodes."""
    pivots: set[tuple[int, int]] = set()
    for view in ("sentence", "token"):
        for p, positions in nodes[view]:
            if not positions or any(not 0 <= pos < len(passages[p]) for pos in positions):
                raise InputError(f"{where}: a {view} node's positions {positions} are outside passage {p}")
            if pivots & {(p, pos) for pos in positions}:
                raise InputError(f"{where}: a token of passage {p} belongs to two nodes")
            pivots |= {(p, pos) for pos in positions}


def sequence_length(q_ids: list[list[int]], records: list[dict], max_positions: int) -> int:
    """The length of the batch's passage sequences ``[CLS] query passage``, within the encoder's positions."""
    length = max(1 + len(q) + len(p) for q, r in zip(q_ids, records) for p in r["passages"])
    if length > max_positions:
        raise InputError(
            f"mir: a passage sequence of {length} tokens (query and [SNT] markers included) exceeds the encoder's "
            f"{max_positions} positions; build the graph set with a smaller window or lower max_query_len"
        )
    return length


def passage_batch(tokenizer, q_ids: list[list[int]], records: list[dict], length: int) -> dict[str, torch.Tensor]:
    """[B, P, T] passage sequences ``[CLS] query [SNT] ...`` (segment 0 up to the query's end, 1 from the first
    [SNT]) with their attention mask, segment ids and ``passage_mask`` [B, P]."""
    shape = (len(records), max(len(r["passages"]) for r in records), length)
    input_ids = torch.full(shape, tokenizer.pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros(shape, dtype=torch.long)
    token_type_ids = torch.zeros(shape, dtype=torch.long)
    passage_mask = torch.zeros(shape[:2], dtype=torch.bool)
    for b, (q, record) in enumerate(zip(q_ids, records)):
        for p, ids in enumerate(record["passages"]):
            seq = [tokenizer.cls_token_id, *q, *ids]
            input_ids[b, p, : len(seq)] = torch.tensor(seq)
            attention_mask[b, p, : len(seq)] = 1
            token_type_ids[b, p, 1 + len(q) : len(seq)] = 1
            passage_mask[b, p] = True
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "token_type_ids": token_type_ids,
        "passage_mask": passage_mask,
    }


def node_batch(view: str, q_ids: list[list[int]], records: list[dict], length: int) -> dict[str, torch.Tensor]:
    """One view's ``{view}_tokens`` [B, N, K] (each node's tokens as passage * T + position), ``{view}_token_mask``
    and ``{view}_nodes`` [B, N] (real nodes)."""
    nodes = [r["nodes"][view] for r in records]
    n_nodes = max(1, max(map(len, nodes)))
    width = max(1, max((len(pos) for doc in nodes for _, pos in doc), default=1))
    tokens = torch.zeros(len(records), n_nodes, width, dtype=torch.long)
    token_mask = torch.zeros(len(records), n_nodes, width, dtype=torch.bool)
    for b, (q, doc) in enumerate(zip(q_ids, nodes)):
        for i, (p, positions) in enumerate(doc):
            # a passage node is its [CLS] (position 0); the others sit after [CLS] and the query
            seq_positions = [0] if view == "passage" else [1 + len(q) + pos for pos in positions]
            tokens[b, i, : len(seq_positions)] = torch.tensor(seq_positions) + p * length
            token_mask[b, i, : len(seq_positions)] = True
    return {f"{view}_tokens": tokens, f"{view}_token_mask": token_mask, f"{view}_nodes": token_mask[..., 0]}


def adjacency_batch(graph: str, records: list[dict], n_nodes: int) -> torch.Tensor:
    """``{graph}_adj`` [B, N, N] bool: the record's edges, symmetric, no self loops."""
    adj = torch.zeros(len(records), n_nodes, n_nodes, dtype=torch.bool)
    for b, record in enumerate(records):
        if record["edges"][graph]:
            i, j = torch.tensor(record["edges"][graph]).T
            adj[b, i, j] = adj[b, j, i] = True
    return adj


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
