"""Position features (TK, TKL; NDRM uses the default frequencies, in either channel layout).

Two sinusoid tables, both laid out ``[sin | cos]`` (the first half of a row holds the sines, the second the
cosines at the same frequencies), differing in their frequencies. Neither TK paper (ECAI 2020, SIGIR 2020)
fixes them, so the choice is the ``sinusoids`` key of TK/TKL (``modules.contextualizer.Contextualizer``):

- ``project`` (default; the CPU configs' recorded figures use it): h = ceil(d / 2) frequencies ``10000^(-i/h)``, i = 0..h-1,
  i.e. the Transformer paper's ``10000^(-2i/d)``; for odd d the last cosine column is dropped. The slowest
  frequency stops one step short of 1/10000.
- ``official`` (matchmaker's ``get_positional_features`` in ``ecai20_tk.py`` / ``sigir20_tkl.py``, the
  tensor2tensor timing signal): h = floor(d / 2) timescales spaced geometrically from 1 to exactly 10000, so
  frequency i is ``10000^(-i/(h-1))``; for odd d a zero column is appended. Entry [p, i] = sin(p * f_i) and
  [p, h + i] = cos(p * f_i).

Channel layout (``layout``; NDRM's ``position_layout``): ``concat`` (default) is the ``[sin | cos]`` above;
``interleaved`` puts sin(p * f_i) at column 2i and cos(p * f_i) at 2i + 1, the PyTorch-tutorial table that the
Conformer-Kernel authors' ``PositionalEncoding`` (TREC-Deep-Learning-Quick-Start, ``conformer.py``) adds, whose
frequencies ``10000^(-2i/d)`` are ``project``'s. The two layouts are one table with its columns permuted: the same
features, but a model's weights read them at other columns, so a checkpoint only scores as it was trained in its own.
"""

from __future__ import annotations

import math

import torch

#: the ``sinusoids`` values: this project's frequencies, or the official TK/TKL code's
SINUSOIDS = ("project", "official")
#: the channel layouts: [sin | cos] halves, or sin and cos interleaved (the Conformer-Kernel authors')
LAYOUTS = ("concat", "interleaved")


def sinusoid_frequencies(dim: int, sinusoids: str = "project", device=None) -> torch.Tensor:
    """The frequencies of one row's sine (and cosine) half, per the module docstring."""
    if sinusoids == "project":
        half = (dim + 1) // 2
        return torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32, device=device) / max(1, half))
    if sinusoids == "official":
        half = dim // 2
        step = math.log(10000.0) / max(1, half - 1)  # one timescale (half == 1): frequency 1
        return torch.exp(-step * torch.arange(half, dtype=torch.float32, device=device))
    raise ValueError(f"sinusoids: {sinusoids!r} is not one of {list(SINUSOIDS)}")


def sinusoidal_positions(
    length: int, dim: int, device=None, sinusoids: str = "project", layout: str = "concat"
) -> torch.Tensor:
    """[length, dim] sine/cosine position features, computed on the fly so any length works; ``sinusoids``
    picks the frequencies, ``layout`` the channel order (module docstring)."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout: {layout!r} is not one of {list(LAYOUTS)}")
    position = torch.arange(length, dtype=torch.float32, device=device)[:, None]
    angles = position * sinusoid_frequencies(dim, sinusoids, device)
    if layout == "interleaved":  # column 2i: sin, 2i + 1: cos (odd width: the last cosine dropped)
        return torch.stack([torch.sin(angles), torch.cos(angles)], dim=-1).flatten(1)[:, :dim]
    table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)[:, :dim]
    if table.shape[1] < dim:  # official, odd width: a zero column
        table = torch.cat([table, table.new_zeros(length, dim - table.shape[1])], dim=-1)
    return table
