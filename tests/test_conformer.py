"""The Conformer layer (models/modules/conformer.py): Eq. 2's separable attention against its defining
formula, no n × n intermediate anywhere in a forward and backward pass, padding that changes nothing, and the
three attentions the scaling bench compares."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from longrank.errors import InputError
from longrank.models.modules.conformer import (
    ATTENTIONS,
    ConformerLayer,
    materialised_attention,
    sdpa_attention,
    separable_attention,
)


def test_separable_attention_is_eq_2_written_out():
    torch.manual_seed(0)
    batch, heads, n, d = 2, 3, 7, 4
    q, k, v = torch.randn(batch, heads, n, d), torch.randn(batch, heads, n, d), torch.randn(batch, heads, n, 5)
    mask = torch.ones(batch, n, dtype=torch.bool)
    mask[1, 5:] = False  # the second sequence has 5 real tokens
    out = separable_attention(q, k, v, mask)
    for b in range(batch):
        real = int(mask[b].sum())
        for h in range(heads):
            phi_q = torch.exp(q[b, h]) / torch.exp(q[b, h]).sum(dim=1, keepdim=True)  # over the key dimension
            keys = k[b, h, :real]
            phi_kt = (torch.exp(keys) / torch.exp(keys).sum(dim=0, keepdim=True)).T  # Φ(Kᵀ): over the sequence
            a = phi_kt @ v[b, h, :real]  # d_key × d_value
            torch.testing.assert_close(out[b, h], phi_q @ a, rtol=1e-5, atol=1e-6)
    assert out.shape == (batch, heads, n, 5)


class ShapeRecorder(TorchDispatchMode):
    """Every tensor any aten operation returns (forward and backward), by shape."""

    def __init__(self):
        super().__init__()
        self.shapes: list[tuple[str, tuple[int, ...]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.shapes.append((str(func), tuple(t.shape)))
        return out


def square_intermediates(attention: str, n: int = 97) -> list[tuple[str, tuple[int, ...]]]:
    """Intermediates with two dimensions of the sequence length n (a prime no other size equals)."""
    torch.manual_seed(0)
    layer = ConformerLayer(16, 4, conv_window=5, conv_groups=4, dropout=0.1, attention=attention)
    x = torch.randn(2, n, 16, requires_grad=True)
    mask = torch.ones(2, n)
    mask[1, 60:] = 0
    recorder = ShapeRecorder()
    with recorder:
        layer(x, mask).square().sum().backward()
    return [(op, shape) for op, shape in recorder.shapes if list(shape).count(n) >= 2]


def test_separable_attention_never_makes_an_n_by_n_tensor():
    assert square_intermediates("separable") == []
    # the recorder does see one where it exists: the written-out attention's softmax(QKᵀ)
    assert any(shape[-2:] == (97, 97) for _, shape in square_intermediates("materialised"))


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_padding_changes_no_real_token(attention):
    """A sequence's outputs do not depend on how far its batch is padded (zeroed before the convolution,
    masked out of the keys), and padding positions come out as zeros."""
    torch.manual_seed(1)
    layer = ConformerLayer(16, 4, conv_window=5, conv_groups=4, attention=attention).eval()
    x = torch.randn(1, 9, 16)
    alone = layer(x, torch.ones(1, 9))
    padded_x = torch.cat([x, torch.randn(1, 6, 16)], dim=1)  # garbage in the padding
    mask = torch.cat([torch.ones(1, 9), torch.zeros(1, 6)], dim=1)
    padded = layer(padded_x, mask)
    torch.testing.assert_close(padded[:, :9], alone, rtol=1e-5, atol=1e-5)
    assert torch.all(padded[:, 9:] == 0)


def test_sdpa_and_materialised_are_the_same_attention_and_no_row_is_nan():
    torch.manual_seed(2)
    q, k, v = torch.randn(3, 2, 6, 4), torch.randn(3, 2, 6, 4), torch.randn(3, 2, 6, 4)
    mask = torch.tensor([[1] * 6, [1] * 3 + [0] * 3, [0] * 6])  # the last row has no real token at all
    torch.testing.assert_close(
        sdpa_attention(q, k, v, mask), materialised_attention(q, k, v, mask), rtol=1e-5, atol=1e-5
    )
    for attention in (separable_attention, sdpa_attention, materialised_attention):
        assert torch.isfinite(attention(q, k, v, mask)).all()


def test_a_layer_trains_with_each_attention():
    for attention in ATTENTIONS:
        torch.manual_seed(3)
        layer = ConformerLayer(8, 2, conv_window=3, conv_groups=2, attention=attention)
        x, mask = torch.randn(2, 10, 8), torch.ones(2, 10)
        layer(x, mask).sum().backward()
        assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in layer.parameters()), attention
    assert ConformerLayer(256, 32).ff[0].out_features == 256  # "all hidden layer sizes 256" (paper, Sec. 4)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"attention": "linear"}, "attention"),
        ({"conv_groups": 5}, "conv_groups"),
        ({"conv_window": 4}, "conv_window"),
    ],
)
def test_bad_settings_are_named(kwargs, message):
    with pytest.raises(InputError, match=message):
        ConformerLayer(16, 4, **{"conv_groups": 4, **kwargs})
    with pytest.raises(InputError, match="n_heads"):
        ConformerLayer(16, 3, conv_groups=4)
