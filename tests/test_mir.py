"""MIR invariants: graph-masked inter-passage attention, passage independence without graphs, the shapes of the
multi-view aggregation, W^C's identity start, every ablation, max_doc_tokens and checkpoints. Records are built
here by hand, following the graphs stage's contract (see mir_graphs/graphs.py), on tiny windows."""

from __future__ import annotations

from itertools import combinations

import pytest
import torch

from longrank.errors import InputError
from longrank.io.json_yaml import write_json
from longrank.models.mir import MIR
from longrank.models.modules.encoders import bert_base_config, load_encoder, load_tokenizer, random_encoder
from longrank.train.losses import listwise_ce
from longrank.config.model_types import artifacts_of

pytestmark = pytest.mark.stage  # a model, a stage or the workflow runs: not a unit test

WINDOW, OVERLAP, STRIDE, MAX_TOKENS = 8, 0.25, 6, 32  # stride = round(8 * 0.75)


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("minilm")


def make_record(tokenizer, sentences: list[str], terms: set[str]) -> dict:
    """A record as the graphs stage writes it: windows of WINDOW tokens every STRIDE (one more for a skipped tail),
    an [SNT] before each sentence piece, a T node per term mention per passage, t2t on equal keys, s2s on pieces
    sharing a key; p2p links neighbouring passages (a stand-in for tf-idf similarity)."""
    toks, sent, mention, keys_of = [], [], [], []
    for s_index, sentence in enumerate(sentences):
        for word in sentence.split():
            m = None
            if word in terms:
                m = len(keys_of)
                keys_of.append("w:" + word)
            for t in tokenizer(word, add_special_tokens=False)["input_ids"]:
                toks.append(t), sent.append(s_index), mention.append(m)
    n = min(len(toks), MAX_TOKENS)
    windows = [(s, min(s + WINDOW, n)) for s in range(0, max(n - WINDOW, 0) + 1, STRIDE)]
    if windows[-1][1] < n:
        windows.append((n - WINDOW, n))
    passages, sentence_nodes, token_nodes, keys, piece_keys = [], [], [], [], []
    for p, (a, b) in enumerate(windows):
        ids, node_of = [], {}
        for i in range(a, b):
            if i == a or sent[i] != sent[i - 1]:
                sentence_nodes.append([p, len(ids)])
                piece_keys.append(set())
                ids.append(tokenizer.sep_token_id)
            if mention[i] is not None:
                piece_keys[-1].add(keys_of[mention[i]])
                if mention[i] not in node_of:
                    node_of[mention[i]] = len(token_nodes)
                    token_nodes.append([p, []])
                    keys.append(keys_of[mention[i]])
                token_nodes[node_of[mention[i]]][1].append(len(ids))
            ids.append(toks[i])
        passages.append(ids)
    return {
        "passages": passages,
        "sentences": sentence_nodes,
        "tokens": token_nodes,
        "token_keys": keys,
        "edges": {
            "p2p": [[i, i + 1] for i in range(len(passages) - 1)],
            "s2s": [[i, j] for i, j in combinations(range(len(piece_keys)), 2) if piece_keys[i] & piece_keys[j]],
            "t2t": [[i, j] for i, j in combinations(range(len(keys)), 2) if keys[i] == keys[j]],
        },
        "n_tokens": n,
    }


DOCS = {
    "d1": (
        [
            "the boundary layer on a flat plate",
            "hypersonic flow heats the plate",
            "shock waves meet the boundary layer",
            "the plate cools",
        ],
        {"boundary", "plate", "hypersonic", "shock"},
    ),
    "d2": (
        [
            "heat transfer at hypersonic speed",
            "the shock stands off the nose",
            "heat flux peaks behind the shock",
            "hypersonic heat transfer is hard to measure in a tunnel",
            "the plate and the nose see the shock",
        ],
        {"heat", "shock", "hypersonic", "nose"},
    ),
    "d3": (["an experimental study of a wing in a slipstream"], set()),  # no T nodes
}
QUERY = "hypersonic heat transfer"


@pytest.fixture(scope="module")
def records(tokenizer):
    return {d: make_record(tokenizer, *spec) for d, spec in DOCS.items()}


@pytest.fixture(scope="module")
def settings(tokenizer):
    return {
        "encoder": "minilm",
        "window": WINDOW,
        "overlap": OVERLAP,
        "max_doc_tokens": MAX_TOKENS,
        "cls_id": tokenizer.cls_token_id,
        "sep_id": tokenizer.sep_token_id,
        "pad_id": tokenizer.pad_token_id,
        "vocab_size": tokenizer.vocab_size,
    }


def small_mir(tokenizer, records, settings, seed: int = 1, **kw) -> MIR:
    encoder = random_encoder(
        bert_base_config(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128), seed=seed
    )
    torch.manual_seed(seed)
    model = MIR(encoder, tokenizer, max_query_len=8, **kw)
    model.use_graphs(records, settings)
    return model.eval()


def open_fusion(model: MIR) -> None:
    """Give W^C a non-zero g half, so the graphs reach the token states (it starts at zero, test 4)."""
    with torch.no_grad():
        for fuse in model.fuse:
            fuse.weight[:, fuse.in_features // 2 :].normal_(std=0.1)


def batch_of(model: MIR, doc_ids=tuple(DOCS)):
    return model.encode([QUERY] * len(doc_ids), list(doc_ids), ["(text is not read)"] * len(doc_ids))


# (1) ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("graph", ["p2p", "s2s", "t2t"])
def test_inter_passage_attention_puts_no_weight_on_non_edges(tokenizer, records, settings, graph):
    model = small_mir(tokenizer, records, settings)
    layer = model.inter[0][graph]
    seen = {}
    hook = layer.register_forward_hook(lambda m, args, out: seen.update(args=args, out=out))
    batch = batch_of(model)
    with torch.no_grad():
        model(**batch)
    hook.remove()
    x, adj, mask = seen["args"]
    assert torch.equal(adj, batch[f"{graph}_adj"])  # the record's edges, symmetric
    weights = layer.attention_weights(x, adj)  # [B, heads, N, N]
    allowed = adj | torch.eye(adj.shape[-1], dtype=torch.bool)
    assert torch.all(weights.masked_select(~allowed[:, None].expand_as(weights)) == 0)
    assert torch.allclose(weights.sum(-1), torch.ones(weights.shape[:-1]))
    assert (weights.masked_select(adj[:, None].expand_as(weights)) > 0).all()  # every edge is attended
    isolated = mask & ~adj.any(-1)  # a node without edges attends to itself alone (the self loop)
    if isolated.any():
        b, i = isolated.nonzero()[0]
        assert torch.allclose(weights[b, :, i, i], torch.ones(weights.shape[1]))
    # behaviourally: a node's output does not move when a node it is not linked to changes
    b, i = mask.nonzero()[0]
    strangers = (~allowed[b, i]).nonzero().squeeze(1)
    if len(strangers):
        moved = x.clone()
        moved[b, strangers] += 1.0
        with torch.no_grad():
            assert torch.allclose(layer(moved, adj, mask)[b, i], seen["out"][b, i], atol=1e-6)
    assert adj.any()  # the documents have edges of this graph to mask around


# (2) ---------------------------------------------------------------------------------------------------
def test_without_graphs_passages_are_encoded_on_their_own(tokenizer, records, settings, device):
    model = small_mir(tokenizer, records, settings, graphs=[]).to(device)
    assert not list(model.inter.parameters()) and not len(model.fuse)  # "w/o graph": no inter-passage layer at all
    batch = batch_of(model)
    on_device = {k: v.to(device) for k, v in batch.items()}
    length = batch["input_ids"].shape[-1]
    reference = {}
    with torch.no_grad():
        passages = {}
        for b, p in batch["passage_mask"].nonzero().tolist():  # the encoder over one passage at a time, unpadded
            n = int(batch["attention_mask"][b, p].sum())
            passages[b, p] = model.encoder(
                input_ids=batch["input_ids"][b, p, None, :n].to(device),
                token_type_ids=batch["token_type_ids"][b, p, None, :n].to(device),
            ).last_hidden_state[0]
        for view in model.views:
            tokens, token_mask, mask = batch[f"{view}_tokens"], batch[f"{view}_token_mask"], batch[f"{view}_nodes"]
            states = torch.zeros(*mask.shape, 64, device=device)
            for b, i in mask.nonzero().tolist():
                positions = tokens[b, i][token_mask[b, i]]
                states[b, i] = torch.stack([passages[b, int(t) // length][int(t) % length] for t in positions]).mean(0)
            reference[view] = (states, mask.to(device))
        got = model.node_states(**on_device)
        for view in model.views:
            assert torch.allclose(got[view][0], reference[view][0], atol=1e-5), view
        assert torch.allclose(model(**on_device), model.aggregate_scores(reference), atol=1e-5)
    # changing passage 1's tokens leaves the nodes of passage 0 as they were; with graphs, it moves them
    graphed = small_mir(tokenizer, records, settings).to(device)
    open_fusion(graphed)
    for m, independent in ((model, True), (graphed, False)):
        batch = {k: v.to(device) for k, v in batch_of(m).items()}
        changed = dict(batch, input_ids=batch["input_ids"].clone())
        body = changed["token_type_ids"][0, 1].bool() & (changed["input_ids"][0, 1] != tokenizer.sep_token_id)
        changed["input_ids"][0, 1][body] = tokenizer.convert_tokens_to_ids("turbine")
        with torch.no_grad():
            before, after = m.node_states(**batch), m.node_states(**changed)
        moved = []
        for view in ("passage", "sentence", "token"):
            in_passage_0 = batch[f"{view}_nodes"][0] & (batch[f"{view}_tokens"][0, :, 0] // length == 0)
            assert in_passage_0.any(), view
            moved.append(
                not torch.allclose(before[view][0][0, in_passage_0], after[view][0][0, in_passage_0], atol=1e-6)
            )
        assert moved == ([False] * 3 if independent else [True] * 3), moved


# (3) ---------------------------------------------------------------------------------------------------
def test_pooling_over_views_has_the_shapes_of_eq_9_to_12(tokenizer, records, settings):
    model = small_mir(tokenizer, records, settings)
    batch = batch_of(model)
    with torch.no_grad():
        states = model.node_states(**batch)
        pooled = model.pool_views(states)
        d = model.document_vector(pooled)
        scores = model.aggregate_scores(states)
    assert set(pooled) == {"passage", "sentence", "token"}
    assert all(o.shape == (3, 64) for o in pooled.values())  # o_v [B, E]
    assert d.shape == (3, 64) and scores.shape == (3,)  # d [B, E], score [B]
    assert model.aggregate.in_features == 3 * 64 and model.score.out_features == 1  # W^A [E x 3E], v [E]
    assert torch.equal(pooled["token"][2], torch.zeros(64))  # d3 has no T nodes: its token view pools to zeros
    assert pooled["token"][0].abs().sum() > 0 and pooled["sentence"][2].abs().sum() > 0
    assert torch.allclose(scores, model(**batch))
    only = small_mir(tokenizer, records, settings, views=["passage"])
    assert only.aggregate.in_features == 64 and set(only.pool) == {"passage"}
    with torch.no_grad():  # a batch without any T node at all
        assert only.pool_views(only.node_states(**batch_of(only, ["d3"])))["passage"].shape == (1, 64)
        assert torch.equal(model.pool_views(model.node_states(**batch_of(model, ["d3"])))["token"], torch.zeros(1, 64))


# (4) ---------------------------------------------------------------------------------------------------
def test_fusion_starts_as_the_identity_on_the_intra_states(tokenizer, records, settings):
    graphed, plain = small_mir(tokenizer, records, settings), small_mir(tokenizer, records, settings, graphs=[])
    assert len(graphed.fuse) == 1  # one W^C per block but the last (aggregation reads G^L)
    fuse = graphed.fuse[0]
    h, g = torch.randn(5, 64), torch.randn(5, 64)
    assert torch.equal(fuse(torch.cat([h, g], -1)), h)  # W^C = [I 0], zero bias
    inputs = {}
    for name, model in (("graphed", graphed), ("plain", plain)):
        for i, layer in enumerate(model.encoder.encoder.layer):
            layer.register_forward_pre_hook(
                lambda m, args, i=i, name=name: inputs.setdefault(name, {}).update({i: args[0].clone()})
            )
    batch = batch_of(graphed)
    with torch.no_grad():
        graphed(**batch), plain(**batch)
    assert set(inputs["graphed"]) == {0, 1}
    for i in inputs["graphed"]:  # the states entering every layer: fused (with graphs) = untouched (without)
        assert torch.equal(inputs["graphed"][i], inputs["plain"][i]), i
    open_fusion(graphed)
    with torch.no_grad():
        graphed(**batch)
    assert not torch.equal(inputs["graphed"][1], inputs["plain"][1])  # the hooks would see a fusion that did something


# (5) ---------------------------------------------------------------------------------------------------
ABLATIONS = [
    {},
    {"graphs": ["p2p"]},
    {"graphs": ["s2s"]},
    {"graphs": ["t2t"]},
    {"graphs": ["s2s", "t2t"]},
    {"graphs": []},
    {"views": ["passage"]},
    {"views": ["sentence", "token"]},
    {"views": ["token"]},
    {"pooling": "max"},
    {"pooling": "cnn"},
    {"pooling": "transformer"},
    {"aggregator": "gcn"},
    {"aggregator": "gin"},
    {"aggregator": "sage"},
    {"shared": True},
    {"stacked": False},
    {"stacked": False, "shared": True},
    {"fully_connected": True},
    {"inter_heads": 2, "pool_heads": 2},
    {"freeze_layers": 1},
]
NEW = ("inter.", "fuse.", "pool.", "aggregate.", "score.")


@pytest.mark.parametrize("config", ABLATIONS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "paper")
def test_every_ablation_builds_scores_and_trains_its_new_weights(tokenizer, records, settings, config):
    model = small_mir(tokenizer, records, settings, **config).train()
    open_fusion(model)  # else the blocks before the last send their graphs nowhere yet, and get zero gradients
    scores = model(**batch_of(model))
    assert scores.shape == (3,) and torch.isfinite(scores).all()
    listwise_ce(scores[None]).backward()
    new = [(n, p) for n, p in model.named_parameters() if n.startswith(NEW)]
    assert {n for n, _ in model.named_parameters()} - {n for n, _ in new} == {
        n for n, _ in model.named_parameters() if n.startswith("encoder.")
    }
    norms: dict[str, float] = {}
    for name, p in new:
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        module = ".".join(
            name.split(".")[: 3 if name.startswith("inter.") else 2]
        )  # inter.<block>.<graph>, fuse.<i>, pool.<view>
        norms[module] = norms.get(module, 0.0) + float(p.grad.norm())
    assert norms and all(v > 0 for v in norms.values()), norms
    expected_inter = 0 if config.get("shared") or config.get("graphs") == [] else 1
    assert bool(list(model.inter.parameters())) == bool(expected_inter)
    frozen = config.get("freeze_layers", 0)
    assert all(p.grad is None for p in model.encoder.encoder.layer[:frozen].parameters())


def test_config_is_checked_and_unknown_keys_are_refused(tokenizer, records, settings):
    with pytest.raises(InputError, match="poolng"):  # a typo is named, not ignored (before any encoder is loaded)
        MIR.from_config({"poolng": "max"})
    for bad, key in (
        ({"graphs": "p2p"}, "graphs"),
        ({"graphs": ["p2p", "q2q"]}, "graphs"),
        ({"views": []}, "views"),
        ({"pooling": "mean"}, "pooling"),
        ({"aggregator": "gat"}, "aggregator"),
        ({"shared": "yes"}, "shared"),
        ({"shared": True, "aggregator": "gcn"}, "shared"),
        ({"inter_heads": 5}, "inter_heads"),
        ({"max_doc_tokens": 0}, "max_doc_tokens"),
        ({"dropout": 1.0}, "dropout"),
    ):
        with pytest.raises(InputError, match=key):
            small_mir(tokenizer, records, settings, **bad)
    assert MIR.default_loss == "listwise_ce"


# (6) ---------------------------------------------------------------------------------------------------
def test_max_doc_tokens_drops_passages_and_the_nodes_and_edges_inside_them(tokenizer, records, settings):
    record = records["d2"]
    assert len(record["passages"]) == 5 and record["n_tokens"] == MAX_TOKENS  # starts 0, 6, 12, 18, 24
    full = small_mir(tokenizer, records, settings)
    cut = small_mir(tokenizer, records, settings, max_doc_tokens=20)  # 1 + ceil((20 - 8) / 6) = 3 windows: tokens 0..19
    assert cut.passages_read(5) == 3 and cut.passages_read(2) == 2 and full.passages_read(5) == 5
    b_full, b_cut = batch_of(full, ["d2"]), batch_of(cut, ["d2"])
    assert int(b_full["passage_mask"].sum()) == 5 and int(b_cut["passage_mask"].sum()) == 3
    assert torch.equal(b_cut["input_ids"][0, :3], b_full["input_ids"][0, :3])
    for view, listed, graph in (
        ("passage", [[p] for p in range(5)], "p2p"),
        ("sentence", record["sentences"], "s2s"),
        ("token", record["tokens"], "t2t"),
    ):
        kept = [i for i, node in enumerate(listed) if node[0] < 3]
        assert 0 < len(kept) < len(listed), view  # the cut drops some nodes of every view and keeps some
        assert int(b_cut[f"{view}_nodes"].sum()) == len(kept)
        renumber = {old: new for new, old in enumerate(kept)}
        expected = torch.zeros(b_cut[f"{view}_nodes"].shape[1], b_cut[f"{view}_nodes"].shape[1], dtype=torch.bool)
        for i, j in record["edges"][graph]:
            if i in renumber and j in renumber:
                expected[renumber[i], renumber[j]] = expected[renumber[j], renumber[i]] = True
        assert torch.equal(b_cut[f"{graph}_adj"][0], expected), graph
        assert len(record["edges"][graph]) > int(expected.sum()) // 2, graph  # edges into dropped passages are gone
        # the kept nodes point at the same tokens as before the cut
        assert torch.equal(b_cut[f"{view}_tokens"][0, : len(kept)], b_full[f"{view}_tokens"][0, kept])
    with torch.no_grad():
        assert torch.isfinite(cut(**b_cut)).all()
    with pytest.raises(InputError, match="max_doc_tokens"):  # more tokens than the graph set read
        small_mir(tokenizer, records, settings, max_doc_tokens=64)


@pytest.mark.parametrize("shared", [False, True])
def test_eager_and_sdpa_encoders_give_the_same_scores(tokenizer, records, settings, shared):
    """MIR builds the BERT layers' masks itself (the passage padding, and with ``shared`` the graph): both attention
    implementations read them alike."""
    scores = []
    for implementation in ("sdpa", "eager"):
        config = bert_base_config(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128)
        config._attn_implementation = implementation
        torch.manual_seed(0)
        model = MIR(random_encoder(config, seed=1), tokenizer, max_query_len=8, shared=shared)
        model.use_graphs(records, settings)
        open_fusion(model.eval())
        with torch.no_grad():
            scores.append(model(**batch_of(model)))
    assert torch.allclose(scores[0], scores[1], atol=1e-5)


# (7) ---------------------------------------------------------------------------------------------------
def test_saved_and_loaded_with_the_projects_checkpoints_gives_identical_scores(tokenizer, records, settings, tmp_path):
    from longrank.models.checkpoint import load_weights, save_weights

    model = small_mir(tokenizer, records, settings, pooling="transformer", aggregator="gin")
    with torch.no_grad():  # weights that a fresh build cannot reproduce, so loading has to do the work
        for p in model.parameters():
            p.add_(0.02 * torch.randn_like(p))
    save_weights(model, tmp_path / "model.safetensors")
    loaded = small_mir(tokenizer, records, settings, seed=2, pooling="transformer", aggregator="gin")
    batch = batch_of(model)
    with torch.no_grad():
        before, fresh = model(**batch), loaded(**batch)
        load_weights(loaded, tmp_path / "model.safetensors")
        after = loaded(**batch)
    assert torch.equal(before, after) and not torch.equal(before, fresh)
    with pytest.raises(InputError, match="sizes|fit"):  # another architecture's weights are refused
        load_weights(small_mir(tokenizer, records, settings, graphs=["p2p"]), tmp_path / "model.safetensors")


# graphs as an artifact -----------------------------------------------------------------------------------
def write_graph_set(directory, records, settings) -> None:
    from longrank.data.records import GRAPHS, SETTINGS, RecordWriter

    directory.mkdir(parents=True)
    with RecordWriter(directory / GRAPHS, "graphs") as writer:
        for doc_id, record in records.items():
            writer.add(doc_id, record)
    write_json(directory / SETTINGS, settings)


def test_graphs_are_a_collection_artifact_read_from_the_graph_set(tokenizer, records, settings, tmp_path):
    assert artifacts_of({"type": "mir"}) == artifacts_of({"type": "mir", "graphs": []}) == {"graphs": "collection"}
    model = small_mir(tokenizer, records, settings)
    with pytest.raises(InputError, match="graphs stage"):
        model.build_artifacts("collection", None, list(DOCS), tmp_path / "x")
    write_graph_set(tmp_path / "set", records, settings)
    reference = model(**batch_of(model))
    model.attach_artifacts(tmp_path / "set")
    assert torch.equal(model(**batch_of(model)), reference)
    with pytest.raises(InputError, match="nope"):
        batch_of(model, ["nope"])
    other = dict(settings, sep_id=settings["sep_id"] + 1)
    write_graph_set(tmp_path / "other", records, other)
    with pytest.raises(InputError, match=f"{tmp_path / 'other'}.*another tokenizer"):
        model.attach_artifacts(tmp_path / "other")
    encoder = random_encoder(
        bert_base_config(num_hidden_layers=1, hidden_size=64, num_attention_heads=4, intermediate_size=128)
    )
    with pytest.raises(InputError, match="attach_artifacts"):  # nothing attached yet
        MIR(encoder, tokenizer).encode([QUERY], ["d1"], ["text"])
    broken = {"d1": dict(records["d1"], tokens=[[0, [99]]], edges=dict(records["d1"]["edges"], t2t=[]))}
    with pytest.raises(InputError, match="d1.*outside passage 0"):
        small_mir(tokenizer, broken, settings).encode([QUERY], ["d1"], ["text"])


def test_on_minilm_the_intra_layers_are_pretrained_and_the_head_is_the_scoring_group(tokenizer, records, settings):
    model = MIR.from_config({"encoder": "minilm", "max_query_len": 8})
    model.use_graphs(records, settings)
    pretrained = load_encoder("minilm").state_dict()
    assert all(torch.equal(v, pretrained[k]) for k, v in model.encoder.state_dict().items())
    scoring = {n for n, _ in model.named_parameters() if n.startswith(MIR.parameter_groups["scoring"])}
    # the aggregation head learns at scoring_lr; the graph layers and W^C inside the stacks at the encoder's rate
    assert scoring == {n for n, _ in model.named_parameters() if n.startswith(("pool.", "aggregate.", "score."))}
    assert {n.split(".")[0] for n, _ in model.named_parameters()} - {n.split(".")[0] for n in scoring} == {
        "encoder",
        "inter",
        "fuse",
    }
    assert (
        len(model.inter) == 6 and len(model.fuse) == 5 and model.inter[0]["t2t"].heads == 12
    )  # MiniLM: 6 layers, 12 heads
    with torch.no_grad():
        assert torch.isfinite(model.eval()(**batch_of(model))).all()
