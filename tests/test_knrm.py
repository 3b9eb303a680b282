"""KNRM: kernel layout, forward shapes, an autograd gradient check, and invariances the model promises."""

from __future__ import annotations

import torch

from longrank.data.words import Vocabulary
from longrank.models.knrm import KNRM
from longrank.models.modules.kernel_pooling import kernel_centers, rbf_kernels
from longrank.models.modules.word_embedder import WordEmbedder


def small_knrm() -> KNRM:
    vocab = Vocabulary.build(
        ["wing lift slipstream propeller", "heat transfer slab conduction", "shock wave cone supersonic"]
    )
    return KNRM(WordEmbedder(vocab), n_kernels=11, max_query_len=8, max_doc_len=12)


def test_kernel_centres_match_knrm():
    mu, sigma = kernel_centers(11)
    assert torch.allclose(mu, torch.tensor([1.0, 0.9, 0.7, 0.5, 0.3, 0.1, -0.1, -0.3, -0.5, -0.7, -0.9]))
    assert sigma[0] == 0.001 and torch.all(sigma[1:] == 0.1)
    # an exact match (cosine 1) fires the exact-match kernel fully and a cosine of 0.1 the 0.1 kernel
    k = rbf_kernels(torch.tensor([[1.0, 0.1]]), mu, sigma)
    assert k[0, 0, 0] == 1.0 and k[0, 1, 5] == 1.0 and k[0, 1, 0] < 1e-6


def test_forward_shapes_and_padding_invariance():
    model = small_knrm()
    batch = model.encode(
        ["wing lift", "heat"], ["d1", "d2"], ["propeller slipstream wing", "supersonic cone shock wave slab"]
    )
    assert batch["query"].shape == (2, 2) and batch["doc"].shape == (2, 5)
    scores = model(**batch)
    assert scores.shape == (2,) and torch.isfinite(scores).all()
    # padding the document further must not change its score
    padded = torch.nn.functional.pad(batch["doc"], (0, 4))
    assert torch.allclose(model(query=batch["query"], doc=padded), scores, atol=1e-6)


def test_gradient_check_and_every_parameter_learns():
    torch.manual_seed(0)
    model = small_knrm().double()
    batch = model.encode(["wing lift slab"], ["d1"], ["propeller wing lift heat"])

    # kernel features are smooth in the dense weights; gradcheck compares autograd with finite differences
    w = model.dense.weight.detach().clone().requires_grad_(True)
    b = model.dense.bias.detach().clone().requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda w_, b_: torch.nn.functional.linear(_features(model, batch), w_, b_).squeeze(-1), (w, b)
    )
    model.zero_grad()
    model(**batch).sum().backward()
    assert model.dense.weight.grad.abs().sum() > 0 and model.embedder.embedding.weight.grad.abs().sum() > 0


def _features(model: KNRM, batch) -> torch.Tensor:
    """KNRM's kernel-pooled features, recomputed to feed gradcheck."""
    from longrank.models.modules.kernel_pooling import cosine_matrix

    q, qm = model.embedder(batch["query"])
    d, dm = model.embedder(batch["doc"])
    k = rbf_kernels(cosine_matrix(q, d), model.mu.double(), model.sigma.double()) * dm[:, None, :, None]
    return (torch.log(torch.clamp(k.sum(2), min=1e-10)) * 0.01 * qm[:, :, None]).sum(1)


def test_exact_matches_raise_the_exact_match_feature():
    model = small_knrm()
    with torch.no_grad():
        model.dense.weight.zero_()
        model.dense.weight[0, 0] = 1.0  # score = exact-match kernel feature
    matching = model(**model.encode(["wing"], ["d1"], ["wing wing lift"]))
    other = model(**model.encode(["wing"], ["d2"], ["heat slab lift"]))
    assert matching > other
