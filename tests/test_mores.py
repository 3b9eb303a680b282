"""MORES invariants: reuse gives the same scores, initialisation follows Sec. 3.3, modules stay apart."""

from __future__ import annotations

import json

import pytest
import torch

from longrank.io import InputError
from longrank.models.encoders import load_encoder, load_tokenizer, random_encoder
from longrank.models.mores import MORES
from longrank.models.mores_store import write_store
from transformers import BertConfig

QUERIES = ["boundary layer flow", "heat transfer at hypersonic speed", "boundary layer flow"]
DOCS = [
    "experimental investigation of the aerodynamics of a wing in a slipstream",
    "the boundary layer in simple shear flow past a flat plate " * 3,
    "heat transfer to blunt bodies at hypersonic speeds in a shock tunnel",
]
DOC_IDS = ["d1", "d2", "d3"]


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("minilm")


def small_mores(tokenizer, blocks=2, **kw) -> MORES:
    cfg = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, intermediate_size=64)
    torch.manual_seed(0)
    model = MORES(random_encoder(cfg, seed=1), tokenizer, interaction_blocks=blocks, max_query_len=16, max_doc_len=40, **kw)
    torch.nn.init.normal_(model.head.weight)  # a head of the init's tiny scale would make every score ~0
    return model.eval()


@pytest.mark.parametrize("reuse", ["s1", "s2"])
def test_reuse_store_gives_the_same_scores(tokenizer, tmp_path, reuse, device):
    model = small_mores(tokenizer).to(device)
    with torch.no_grad():
        reference = model(**{k: v.to(device) for k, v in model.encode(QUERIES, DOCS).items()})
    online = model.score_pairs(QUERIES, DOC_IDS, DOCS)
    meta = write_store(model, DOC_IDS, DOCS, tmp_path / "store.json", reuse, batch_size=2, device=device)
    model.attach_store(tmp_path / "store.json")
    stored = model.score_pairs(QUERIES, DOC_IDS, ["(text is not read)"] * 3)
    model.store = model.store.resident(device)  # the speed table's GPU setting: the store held in device memory
    resident = model.score_pairs(QUERIES, DOC_IDS, ["(text is not read)"] * 3)
    assert torch.allclose(online, reference, atol=1e-5)
    assert torch.allclose(stored, reference, atol=1e-5)
    assert torch.equal(resident, stored)
    assert reference.std() > 1e-3  # the comparison is not between constants
    assert meta["slots"] == (1 if reuse == "s1" else 4)
    assert meta["mb_per_document_at"]["128"] == pytest.approx(128 * meta["slots"] * 32 * 4 / 2**20)


def test_store_refuses_other_weights_and_unknown_docs(tokenizer, tmp_path):
    model = small_mores(tokenizer)
    write_store(model, DOC_IDS, DOCS, tmp_path / "s.json", "s2")
    model.attach_store(tmp_path / "s.json")
    with pytest.raises(InputError, match="not in the reuse store"):
        model.score_pairs(QUERIES[:1], ["nope"], ["x"])
    with torch.no_grad():
        model.interaction_blocks[0].cross_attention.self.key.weight.add_(1.0)
    with pytest.raises(InputError, match="other weights"):
        model.attach_store(tmp_path / "s.json")


def test_modules_never_see_the_other_side(tokenizer):
    model = small_mores(tokenizer)
    q = model.encode_queries(["boundary layer flow"])
    d1, d2 = model.encode_docs([DOCS[0]]), model.encode_docs([DOCS[2]])
    q1, q2 = model.encode_queries(["boundary layer flow"]), model.encode_queries(["wing slipstream"])
    with torch.no_grad():
        # forward() takes both sides; the query representation it uses must not depend on the document
        seen = {}
        hook = model.query_module.register_forward_hook(lambda m, i, o: seen.setdefault("q", []).append(o.last_hidden_state))
        hook2 = model.document_module.register_forward_hook(lambda m, i, o: seen.setdefault("d", []).append(o.last_hidden_state))
        for doc in (d1, d2):
            model(**{f"q_{k}": v for k, v in q.items()}, **{f"d_{k}": v for k, v in doc.items()})
        for query in (q1, q2):
            model(**{f"q_{k}": v for k, v in query.items()}, **{f"d_{k}": v for k, v in d1.items()})
        hook.remove(), hook2.remove()
    assert torch.equal(seen["q"][0], seen["q"][1])  # doc changed, query representation did not
    assert torch.equal(seen["d"][2], seen["d"][3])  # query changed, document representation did not
    assert not torch.equal(seen["d"][0], seen["d"][1]) and not torch.equal(seen["q"][2], seen["q"][3])


@pytest.fixture(scope="module")
def minilm_state():
    return {k: v.clone() for k, v in load_encoder("minilm").state_dict().items()}


@pytest.mark.parametrize("blocks", [1, 2])
def test_initialisation_from_pretrained_weights(minilm_state, blocks):
    model = MORES.from_config({"encoder": "minilm", "interaction_blocks": blocks})
    n_layers = 6
    # document module: one full copy
    for k, v in model.document_module.state_dict().items():
        assert torch.equal(v, minilm_state[k]), k
    # query module: embeddings + the first L-K layers of the other copy
    q_state = model.query_module.state_dict()
    assert len(model.query_module.encoder.layer) == n_layers - blocks
    for k, v in q_state.items():
        assert torch.equal(v, minilm_state[k]), k
    # IB i: layer L-K+i; self-attention, FFN, and the cross-attention copied from the self-attention
    for i, ib in enumerate(model.interaction_blocks):
        prefix = f"encoder.layer.{n_layers - blocks + i}."
        for name, v in ib.state_dict().items():
            part, rest = name.split(".", 1)
            source = {"cross_attention": "attention.", "self_attention": "attention.", "intermediate": "intermediate.", "output": "output."}[part]
            assert torch.equal(v, minilm_state[prefix + source + rest]), name
    # the copies are separate parameters (training one does not move the other)
    ib = model.interaction_blocks[0]
    assert ib.cross_attention.self.query.weight.data_ptr() != ib.self_attention.self.query.weight.data_ptr()


def test_random_cross_attention_ablation(minilm_state):
    model = MORES.from_config({"encoder": "minilm", "interaction_blocks": 1, "cross_attention_init": "random"})
    ib = model.interaction_blocks[0]
    assert not torch.equal(ib.cross_attention.self.query.weight, minilm_state["encoder.layer.5.attention.self.query.weight"])
    assert torch.equal(ib.self_attention.self.query.weight, minilm_state["encoder.layer.5.attention.self.query.weight"])


def test_bad_config_names_the_key():
    with pytest.raises(InputError, match="interaction_blocks"):
        MORES.from_config({"encoder": "minilm", "interaction_blocks": 6})
    with pytest.raises(InputError, match="reuse"):
        MORES.from_config({"encoder": "minilm", "reuse": "s3"})
    with pytest.raises(InputError, match="encoder"):
        MORES.from_config({"encoder": "/no/such/encoder"})


def test_speed_table_smoke(tmp_path):
    from argparse import Namespace

    from longrank.bench import mores_speed
    from longrank.io import read_json

    out = tmp_path / "speed.json"
    mores_speed.run(Namespace(encoder="minilm", sizes=["configured"], lengths=[16], query_len=8, blocks=[1], candidates=2, target=10,
                              batch_size=2, min_time=0.0, max_repeats=1, threads=0, device="cpu", seed=0, out=out))
    table = read_json(out)
    assert {"title", "columns", "rows", "notes"} <= set(table)
    assert [(r["model"], r["reuse"]) for r in table["measurements"]] == [("BERT ranker", "-"), ("MORES 1xIB", "none"), ("MORES 1xIB", "s1"), ("MORES 1xIB", "s2")]
    bounds = [r["flop_bound"] for r in table["measurements"]]
    assert bounds[0] == 1.0 and bounds[2] < bounds[3]  # S2 skips the K/V projections S1 still runs
    assert table["measurements"][3]["space_mb_per_doc"] == pytest.approx(2 * table["measurements"][2]["space_mb_per_doc"])


def test_precompute_reads_a_long_inline_model_config_and_names_a_bad_one(tmp_path):
    from longrank.models.mores_store import read_model_config

    entry = {"type": "mores", "encoder": "minilm", "train": {f"key_{i}": i for i in range(40)}}  # longer than a file name may be
    assert read_model_config(json.dumps(entry)) == entry
    path = tmp_path / "entry.json"
    path.write_text(json.dumps(entry))
    assert read_model_config(str(path)) == entry
    with pytest.raises(InputError, match="not valid JSON"):
        read_model_config('{"type": ')
    with pytest.raises(InputError, match="missing.json"):
        read_model_config(str(tmp_path / "missing.json"))
