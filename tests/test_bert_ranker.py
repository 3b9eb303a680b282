"""BERT ranker FirstP/MaxP and the zero-shot bi-encoder."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from transformers import BertConfig

from longrank.errors import InputError
from longrank.models.bert_ranker import BertRanker
from longrank.models.bi_encoder import BiEncoder
from longrank.models.modules.encoders import load_encoder, load_tokenizer, random_encoder

pytestmark = pytest.mark.stage  # a model, a stage or the workflow runs: not a unit test


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("minilm")


def small_encoder(tokenizer, **overrides):
    cfg = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        **overrides,
    )
    return random_encoder(cfg, seed=3)


def test_maxp_is_the_max_over_firstp_scores_of_each_passage(tokenizer, device):
    torch.manual_seed(0)
    maxp = (
        BertRanker(small_encoder(tokenizer), tokenizer, mode="maxp", passage_len=8, passage_stride=6, max_passages=5)
        .eval()
        .to(device)
    )
    torch.nn.init.normal_(maxp.head.weight)
    firstp = BertRanker(maxp.encoder, tokenizer, mode="firstp", passage_len=8).eval().to(device)
    firstp.head.load_state_dict(maxp.head.state_dict())
    query = "boundary layer transition"
    doc = (
        "the boundary layer on a flat plate at high mach numbers shows transition to turbulence downstream of the leading edge "
        * 2
    )
    short = "short doc"
    ids = tokenizer(doc, add_special_tokens=False)["input_ids"]
    windows = maxp.passages(ids)
    assert len(windows) == 5 and windows[0] == ids[:8] and windows[1] == ids[6:14]
    with torch.no_grad():
        got = maxp.score_pairs([query, query], ["d", "s"], [doc, short])
        per_passage = [firstp.score_pairs([query], ["w"], [tokenizer.decode(w)]).item() for w in windows]
        short_first = firstp.score_pairs([query], ["s"], [short]).item()
    assert got[0].item() == pytest.approx(max(per_passage), abs=1e-5)
    assert got[1].item() == pytest.approx(short_first, abs=1e-5)  # padding passages never win


def test_pair_input_layout(tokenizer):
    ranker = BertRanker(small_encoder(tokenizer), tokenizer, mode="firstp", passage_len=4, max_query_len=3)
    batch = ranker.encode(["a b c d e"], ["d1"], ["one two three four five six"])
    ids, types = batch["input_ids"][0, 0], batch["token_type_ids"][0, 0]
    assert ids[0] == tokenizer.cls_token_id and ids[4] == tokenizer.sep_token_id and ids[-1] == tokenizer.sep_token_id
    assert types.tolist() == [0] * 5 + [1] * 5


def test_firstp_gradients_reach_the_encoder(tokenizer):
    ranker = BertRanker(
        small_encoder(tokenizer), tokenizer, mode="maxp", passage_len=8, max_passages=3, freeze_layers=1
    )
    ranker(**ranker.encode(["q one", "q two"], ["d1", "d2"], ["some words here " * 6, "x"])).sum().backward()
    assert ranker.encoder.encoder.layer[1].output.dense.weight.grad is not None
    assert ranker.encoder.encoder.layer[0].output.dense.weight.grad is None  # frozen


def test_bad_config_names_the_key():
    with pytest.raises(InputError, match="mode"):
        BertRanker.from_config({"mode": "sump"})
    with pytest.raises(InputError, match="passage_len"):
        BertRanker.from_config({"passage_len": 500})
    with pytest.raises(InputError, match="maxp_training"):
        BertRanker.from_config({"mode": "maxp", "maxp_training": "mean"})
    with pytest.raises(InputError, match="maxp_train"):  # an unknown (misspelt) key is named, not ignored
        BertRanker.from_config({"mode": "maxp", "maxp_train": "max"})


def maxp_ranker(tokenizer, **kw):
    # no dropout: train mode differs from eval mode only by what maxp_training changes
    encoder = small_encoder(tokenizer, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    ranker = BertRanker(encoder, tokenizer, mode="maxp", passage_len=8, passage_stride=8, max_passages=6, **kw)
    torch.nn.init.normal_(ranker.head.weight)
    return ranker


MAXP_DOCS = [
    "the boundary layer on a flat plate at high mach numbers shows transition to turbulence downstream of the "
    "leading edge while heat transfer rates rise sharply near the wall and skin friction follows a similar trend "
    "which experiments in the wind tunnel confirmed for several nose shapes",
    "short doc",
    "heat transfer to blunt bodies at hypersonic speeds measured in a shock tunnel facility for a range of enthalpies",
]
MAXP_IDS = ["long", "short", "medium"]


def test_maxp_passage_training_scores_one_random_passage_and_eval_takes_the_max(tokenizer):
    ranker = maxp_ranker(tokenizer)
    assert ranker.maxp_training == "passage"  # the default: Dai & Callan
    batch = ranker.encode(["boundary layer transition"] * 3, MAXP_IDS, MAXP_DOCS)
    with torch.no_grad():
        per_passage = ranker.eval().passage_scores(**batch)
        assert per_passage[0].isfinite().sum() >= 4 and per_passage[1].isfinite().sum() == 1
        assert torch.equal(ranker(**batch), per_passage.max(dim=1).values)  # eval: always the max
        ranker.train()
        picked = []
        for seed in range(40):
            torch.manual_seed(seed)
            scores = ranker(**batch)
            torch.manual_seed(seed)
            assert torch.equal(ranker(**batch), scores)  # torch's RNG decides: reproducible under the loop's seeding
            index = []
            for doc, score in enumerate(scores):
                hits = torch.isclose(per_passage[doc], score, rtol=0, atol=1e-5).nonzero().flatten().tolist()
                assert len(hits) == 1, (doc, score, per_passage[doc])  # exactly one of the document's passage scores
                index.append(hits[0])
            picked.append(index)
    first = [p[0] for p in picked]
    n_first = int(per_passage[0].isfinite().sum())
    assert set(first) == set(range(n_first))  # every passage of a long document gets drawn
    assert all(p[1] == 0 for p in picked)  # a one-passage document always scores its passage
    assert any(p[0] != per_passage[0].argmax().item() for p in picked)  # training does not go through the max


def test_maxp_training_max_keeps_the_max_in_training(tokenizer):
    ranker = maxp_ranker(tokenizer, maxp_training="max")
    batch = ranker.encode(["boundary layer transition"] * 3, MAXP_IDS, MAXP_DOCS)
    with torch.no_grad():
        expected = ranker.eval().passage_scores(**batch).max(dim=1).values
        assert torch.allclose(ranker.train()(**batch), expected, atol=1e-5)


def test_maxp_passage_training_gradients_reach_the_encoder_and_firstp_is_unaffected(tokenizer):
    ranker = maxp_ranker(tokenizer).train()
    ranker(**ranker.encode(["q one", "q two"], MAXP_IDS[:2], MAXP_DOCS[:2])).sum().backward()
    assert ranker.encoder.encoder.layer[0].output.dense.weight.grad is not None
    firstp = BertRanker(ranker.encoder, tokenizer, mode="firstp", passage_len=8).train()
    firstp.head.load_state_dict(ranker.head.state_dict())
    batch = firstp.encode(["q one"], MAXP_IDS[:1], MAXP_DOCS[:1])
    with torch.no_grad():
        assert torch.equal(firstp(**batch), firstp.eval()(**batch))


def test_bi_encoder_is_mean_pooled_cosine():
    model = BiEncoder.from_config({"encoder": "minilm"}).eval()
    tok, enc = load_tokenizer("minilm"), load_encoder("minilm").eval()
    query, doc = "what is the boundary layer", "the boundary layer is the thin layer of fluid near a wall"
    with torch.no_grad():
        got = model(**model.encode([query], ["d"], [doc])).item()
        vecs = []
        for text in (query, doc):
            ids = tok(text, return_tensors="pt")
            states = enc(**ids).last_hidden_state[0]  # one text: no padding, plain mean
            vecs.append(states.mean(0))
    assert got == pytest.approx(F.cosine_similarity(vecs[0], vecs[1], dim=0).item(), abs=1e-5)
    # batching with padding changes nothing
    with torch.no_grad():
        batched = model(**model.encode([query, "x"], ["d", "dd"], [doc, doc + " " + doc]))
    assert batched[0].item() == pytest.approx(got, abs=1e-5)


def test_segment_cosine_scores_the_cosine_of_the_two_segments_mean_states(tokenizer):
    ranker = BertRanker(
        small_encoder(tokenizer), tokenizer, mode="firstp", passage_len=16, pooling="segment_cosine"
    ).eval()
    assert ranker.head is None  # nothing new to learn: the score is defined by the encoder alone
    query, doc = "boundary layer transition", "the boundary layer on a flat plate shows transition"
    q_ids = tokenizer(query, add_special_tokens=False)["input_ids"]
    d_ids = tokenizer(doc, add_special_tokens=False)["input_ids"]
    seq = [tokenizer.cls_token_id, *q_ids, tokenizer.sep_token_id, *d_ids, tokenizer.sep_token_id]
    types = [0] * (len(q_ids) + 2) + [1] * (len(d_ids) + 1)
    with torch.no_grad():
        got = ranker(**ranker.encode([query, query], ["d", "x"], [doc, "x " * 40]))[
            0
        ]  # padded next to a longer document
        states = ranker.encoder(input_ids=torch.tensor([seq]), token_type_ids=torch.tensor([types])).last_hidden_state[
            0
        ]
    split = len(q_ids) + 2
    expected = 20.0 * F.cosine_similarity(states[:split].mean(0), states[split:].mean(0), dim=0)
    assert got.item() == pytest.approx(expected.item(), abs=1e-4)


def test_wordpiece_ids_of_a_long_text_are_those_of_the_whole_text():
    from longrank.models.modules.encoders import load_tokenizer, wordpiece_ids

    tok = load_tokenizer("minilm")
    long = " ".join(
        ["Supersonic flow, (past) a slender cone: pressure-distribution!"] * 400
    )  # 2,400 words, punctuation
    for n in (1, 7, 128):
        assert (
            wordpiece_ids(tok, [long, "short text"], n)
            == tok([long, "short text"], add_special_tokens=False, truncation=True, max_length=n)["input_ids"]
        )
