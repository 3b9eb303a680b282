"""The RBF kernels' exp floored without autograd (models/modules/kernel_pooling.py: ``gaussian``): every kernel model
scores exactly as with the exact exp, which autograd keeps. The untrained models' cosines put most kernel entries
where float32's exp underflows (the exact-match kernel's sigma 0.001 at every cosine below 0.987), so a floor that a
model's pooling could see would move its scores here."""

from __future__ import annotations

import pytest
import torch

from longrank.models.modules.kernel_pooling import EXP_FLOOR, gaussian
from longrank.models.registry import build_model
from test_ndrm import SMALL as NDRM_SMALL
from test_tk_tkl import pairs, small, write_tiny_corpus


MODELS = {
    "knrm": small("knrm"),
    "tk": small("tk"),
    "tkl": small("tkl"),
    **{variant: {**NDRM_SMALL, "variant": variant} for variant in ("ndrm1", "ndrm3")},
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_tiny_corpus(tmp_path_factory.mktemp("kernels") / "data")


@pytest.mark.parametrize("name", MODELS)
def test_scores_without_autograd_equal_the_exact_exps(corpus, name):
    torch.manual_seed(0)
    model = build_model(MODELS[name], corpus).eval()
    queries, doc_ids, docs = pairs(corpus)
    with torch.enable_grad():  # the parameters require grad: every kernel takes the exact exp
        exact = model.score_pairs(queries, doc_ids, docs).detach()
    with torch.no_grad():
        floored = model.score_pairs(queries, doc_ids, docs)
    assert torch.equal(floored, exact), (floored - exact).abs().max()
    if name.startswith("ndrm"):  # the impact index's terms, scored by the same kernels
        terms = sorted({t for q in queries for t in model.query_terms(q)})
        with torch.no_grad():
            by_term = model.term_scores(terms, doc_ids, docs)
        row = {t: i for i, t in enumerate(terms)}
        summed = torch.stack([by_term[[row[t] for t in model.query_terms(q)], j].sum() for j, q in enumerate(queries)])
        assert torch.allclose(summed, exact, atol=1e-5)


def test_the_floor_keeps_every_exponent_above_it_and_lifts_the_underflowing_ones():
    exponents = torch.tensor([0.0, -1.0, -50.0, EXP_FLOOR, -87.5, -100.0, -800.0])
    floored = gaussian(exponents.clone())
    assert torch.equal(floored[:4], torch.exp(exponents[:4]))
    assert torch.equal(floored[4:], torch.exp(torch.tensor(EXP_FLOOR)).expand(3))
    assert torch.exp(exponents[4:]).max() < torch.finfo(torch.float32).tiny  # subnormal or 0 from the exact exp
    with_grad = exponents.clone().requires_grad_()
    assert torch.equal(gaussian(with_grad), torch.exp(exponents))
