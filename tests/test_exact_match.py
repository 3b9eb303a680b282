"""TK's and TKL's ``exact_match`` channel (``models/modules/exact_match.py``): its value on known ids, unknown words
and padding never matching, the score it adds to each model at the same weights, and the default untouched."""

from __future__ import annotations

import math

import pytest
import torch

from longrank.data.words import OOV, PAD
from longrank.models.modules.exact_match import INITIAL_WEIGHT, ExactMatch
from longrank.models.registry import build_model
from longrank.train.optimiser import parameter_groups
from longrank.config.train_settings import TrainSettings

from test_tk_tkl import write_tiny_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_tiny_corpus(tmp_path_factory.mktemp("exact_match") / "data")


def configs():
    return {
        "tk": {"type": "tk", "n_layers": 1, "max_query_len": 8, "query_term_weights": "idf"},
        "tkl": {"type": "tkl", "n_layers": 1, "max_query_len": 8, "max_doc_len": 200, "window": 40},
    }


def test_the_channel_is_the_weighted_log_term_frequency_of_known_query_words():
    a, b, c = OOV + 1, OOV + 2, OOV + 3
    query = torch.tensor([[a, b, OOV, PAD], [c, PAD, PAD, PAD]])
    doc = torch.tensor([[a, a, OOV, c, a, PAD], [OOV, OOV, PAD, PAD, PAD, PAD]])
    weights = torch.tensor([[2.0, 3.0, 5.0, 0.0], [7.0, 0.0, 0.0, 0.0]])
    got = ExactMatch()(query, doc, weights)
    # query 1: a three times (weight 2), b absent, the unknown word never matches the document's; query 2: c absent,
    # and the document's unknown words match nothing
    assert got.tolist() == pytest.approx([INITIAL_WEIGHT * 2.0 * math.log(4.0), 0.0])


@pytest.mark.parametrize("model_type", ["tk", "tkl"])
def test_the_channel_adds_its_value_to_the_models_score_at_the_same_weights(corpus, model_type):
    cfg = configs()[model_type]
    torch.manual_seed(0)
    plain = build_model(cfg, corpus).eval()
    torch.manual_seed(0)
    with_channel = build_model({**cfg, "exact_match": True}, corpus).eval()
    assert set(with_channel.state_dict()) - set(plain.state_dict()) == {"exact_match.weight"}
    assert all(torch.equal(v, with_channel.state_dict()[k]) for k, v in plain.state_dict().items())
    doc_ids = sorted(corpus.docs)[:6]
    queries = [corpus.queries[d.split("_")[0]] for d in doc_ids]
    inputs = plain.encode(queries, doc_ids, [corpus.docs[d] for d in doc_ids])
    with torch.no_grad():
        base, extended = plain(**inputs), with_channel(**inputs)
        embedder = plain.embedder
        weights = embedder.query_weights(inputs["query"], embedder.token_mask(inputs["query"]))
        channel = with_channel.exact_match(inputs["query"], inputs["doc"], weights)
    assert (channel > 0).all()  # every document holds some of its topic's words
    assert torch.allclose(extended, base + channel, atol=1e-5)


@pytest.mark.parametrize("model_type", ["tk", "tkl"])
def test_the_channel_learns_at_the_scoring_rate(corpus, model_type):
    model = build_model({**configs()[model_type], "exact_match": True}, corpus)
    groups = {g["name"]: g for g in parameter_groups(model, TrainSettings(lr=1e-4, scoring_lr=0.05))}
    assert any(p is model.exact_match.weight for p in groups["scoring"]["params"])
    assert groups["scoring"]["lr"] == 0.05


@pytest.mark.parametrize("model_type", ["tk", "tkl"])
def test_off_by_default_with_no_extra_parameter(corpus, model_type):
    model = build_model(configs()[model_type], corpus)
    assert model.exact_match is None
    assert not any("exact_match" in name for name in model.state_dict())
