"""Cross-attention of a few query tokens over documents' keys and values read where they lie (MORES's Interaction
Blocks, Eq. 5): one fused kernel per block on CUDA, one SDPA per candidate over views of its rows on the CPU.

Why a kernel of its own: MORES scores 1,000 candidates with 16 query tokens each. PyTorch's fused attention tiles
the queries by 64 rows, so 16 queries per (candidate, head) fill a quarter of its tile, and the Reuse-S2 store
must first be gathered into one dense [candidates, 512, hidden] tensor per block (a copy of the whole store's
share, at memory bandwidth). On an H100 the two took 12.7 of a Reuse-S2 pass's 26 ms (docs/studies/speed.md).
``attend_rows`` reads each candidate's key and value rows straight from a token table (the resident store, or the
document module's projections), so nothing is gathered, and tiles the 16 queries by 16.

The documents are described by :class:`DocRows`: a table of token rows ``[T, C]`` (one row per stored token, the
keys of block k at columns ``key_cols[k]`` .. + hidden, the values at ``value_cols[k]``), and per candidate the
first row and the number of rows (right-padded documents: a prefix mask). ``dense`` turns it into the
(keys, values, mask) the SDPA path takes, so both paths read the same rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

try:  # Triton ships with CUDA builds of PyTorch; the CPU build has none and never needs it
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the torch build
    triton = None


@dataclass
class DocRows:
    """Candidates' keys and values as rows of ``table`` (``[T, C]``, unit column stride): candidate b owns rows
    ``starts[b]`` .. ``starts[b] + lengths[b] - 1``; ``max_len`` is ``lengths.max()``, known on the host (no
    device sync to size a batch)."""

    table: torch.Tensor
    starts: torch.Tensor
    lengths: torch.Tensor
    key_cols: list[int]
    value_cols: list[int]
    hidden: int
    max_len: int
    resident: bool = False  # the table is a resident store's: the same tensor on every call (CUDA graphs may keep it)

    @classmethod
    def from_dense(cls, kv: torch.Tensor, mask: torch.Tensor, blocks: int, max_len: int | None = None) -> DocRows:
        """``kv``: ``[B, L, 2 * blocks * hidden]`` (block k's keys, then its values), ``mask``: ``[B, L]`` right-padded."""
        batch, length, width = kv.shape
        hidden = width // (2 * blocks)
        lengths = mask.sum(dim=1).to(torch.int32)
        starts = torch.arange(batch, device=kv.device, dtype=torch.int64) * length
        cols = [2 * k * hidden for k in range(blocks)]
        return cls(
            kv.reshape(batch * length, width),
            starts,
            lengths,
            cols,
            [c + hidden for c in cols],
            hidden,
            length if max_len is None else max_len,
        )

    def dense(self, block: int, dtype: torch.dtype | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(keys, values) ``[B, max_len, hidden]`` of ``block`` and the key mask ``[B, max_len]``, gathered (padded
        positions read the candidate's first row: the mask keeps attention off them)."""
        steps = torch.arange(self.max_len, device=self.table.device)
        mask = steps[None, :] < self.lengths[:, None].to(steps.device)
        rows = torch.where(mask, self.starts[:, None] + steps[None, :], self.starts[:, None])
        k0, v0 = self.key_cols[block], self.value_cols[block]
        picked = self.table[rows]
        keys, values = picked[..., k0 : k0 + self.hidden], picked[..., v0 : v0 + self.hidden]
        if dtype is not None:
            keys, values = keys.to(dtype), values.to(dtype)
        return keys, values, mask


@dataclass
class DocStates:
    """Candidates' states ``[B, L, hidden]`` as the document module left them (what a Reuse-S1 store holds) and
    their key mask ``[B, L]`` (right-padded): the blocks attend over them without projecting them
    (``mores_interaction.attend_states``)."""

    states: torch.Tensor
    mask: torch.Tensor


def kernel_available(device: torch.device, head_dim: int, query_len: int) -> bool:
    """The fused kernel runs on CUDA with Triton, for head widths of a power of two (16..256) and up to 128 query
    tokens per candidate (one tile)."""
    return (
        triton is not None
        and torch.device(device).type == "cuda"
        and 16 <= head_dim <= 256
        and head_dim & (head_dim - 1) == 0
        and query_len <= 128
    )


def attend_rows(query: torch.Tensor, docs: DocRows, block: int, heads: int) -> torch.Tensor:
    """softmax(Q K^T / sqrt(d_head)) V per head for ``query`` ``[B, M, hidden]`` (projected) over ``block``'s keys
    and values in ``docs``; returns ``[B, M, hidden]`` in the query's dtype. fp32 inputs are multiplied on the tensor
    cores with fp32's accuracy (3xTF32: each operand split into a TF32 part and its remainder, three products summed),
    not in plain TF32: the scores stay those of SDPA with TF32 off (within 1e-4 of their spread, tests/test_mores.py)."""
    batch, m, hidden = query.shape
    head_dim = hidden // heads
    if query.device.type == "cpu":
        return _attend_each(query, docs, block, heads)
    if not kernel_available(query.device, head_dim, m):
        keys, values, mask = docs.dense(block, query.dtype)
        split = lambda t: t.view(t.shape[0], t.shape[1], heads, head_dim).transpose(1, 2)  # noqa: E731
        out = torch.nn.functional.scaled_dot_product_attention(
            split(query), split(keys), split(values), attn_mask=mask[:, None, None, :]
        )
        return out.transpose(1, 2).reshape(batch, m, hidden)
    return _launch(query, docs, block, heads)


def attend_own_rows(qkv: torch.Tensor, heads: int) -> torch.Tensor:
    """Self-attention of each candidate's M query tokens over themselves (MORES's Eq. 6, no padding), from their
    fused projections ``qkv`` ``[B, M, 3 * hidden]`` (queries, keys, values side by side), through the same kernel:
    a candidate's keys and values are its own M rows of ``qkv``. Why: PyTorch's fused attention tiles queries and keys
    by 64 or more, so 16 tokens per (candidate, head) leave most of each tile idle (cuDNN's flash kernel took 0.42 ms
    of a 5.2 ms bf16 Reuse-S2 pass on an H100, PyTorch's fp32 kernel 0.8 of 16.7 ms; docs/studies/speed.md, "MORES on the GPU")."""
    batch, m, width = qkv.shape
    hidden = width // 3
    qkv = qkv if qkv.is_contiguous() else qkv.contiguous()
    starts = torch.arange(batch, device=qkv.device, dtype=torch.int64) * m
    lengths = torch.full((batch,), m, device=qkv.device, dtype=torch.int32)
    own = DocRows(qkv.view(batch * m, width), starts, lengths, [hidden], [2 * hidden], hidden, m)
    return _launch(qkv[..., :hidden], own, 0, heads)


def _launch(query: torch.Tensor, docs: DocRows, block: int, heads: int) -> torch.Tensor:
    """The kernel over ``docs``' rows of ``block`` (``query``: unit stride along its hidden columns)."""
    batch, m, hidden = query.shape
    head_dim = hidden // heads
    query = query if query.stride(-1) == 1 else query.contiguous()
    table = docs.table
    assert table.stride(-1) == 1, "DocRows.table needs a unit column stride"
    out = torch.empty(batch, m, hidden, device=query.device, dtype=query.dtype)
    block_m = max(16, triton.next_power_of_2(m))
    _cross_attention[(batch, heads)](
        query,
        table,
        out,
        docs.starts,
        docs.lengths,
        query.stride(0),
        query.stride(1),
        table.stride(0),
        out.stride(0),
        out.stride(1),
        docs.key_cols[block],
        docs.value_cols[block],
        m,
        1.0 / math.sqrt(head_dim),
        HEAD_DIM=head_dim,
        BLOCK_M=block_m,
        FP32=query.dtype == torch.float32,
    )
    return out


def _attend_each(query: torch.Tensor, docs: DocRows, block: int, heads: int) -> torch.Tensor:
    """The CPU's ``attend_rows``: one SDPA per candidate over views of its own rows (no gathered copy of the batch,
    no mask: each candidate's keys are exactly its tokens). On 2 threads, MiniLM, 32 candidates of 512 tokens, two
    blocks: 22.9 ms against 35.0 ms for the gather and one masked SDPA, the same outputs to the bit."""
    batch, m, hidden = query.shape
    split = lambda t: t.view(1, t.shape[-2], heads, -1).transpose(1, 2)  # noqa: E731
    k0, v0 = docs.key_cols[block], docs.value_cols[block]
    out = torch.empty(batch, m, hidden, dtype=query.dtype)
    for b, (start, length) in enumerate(zip(docs.starts.tolist(), docs.lengths.tolist())):
        rows = docs.table[start : start + length]
        keys, values = rows[:, k0 : k0 + hidden].to(query.dtype), rows[:, v0 : v0 + hidden].to(query.dtype)
        attended = torch.nn.functional.scaled_dot_product_attention(split(query[b]), split(keys), split(values))
        out[b] = attended.transpose(1, 2).reshape(m, hidden)
    return out


if triton is not None:

    @triton.autotune(  # tried once per process and shape class (a few hundred ms at the first batch), then cached
        configs=[
            triton.Config({"BLOCK_N": n}, num_warps=w, num_stages=s)
            for n, w, s in [(64, 4, 2), (64, 4, 3), (128, 4, 3), (128, 8, 3), (64, 2, 3), (32, 4, 4), (128, 4, 4)]
        ],
        key=["HEAD_DIM", "BLOCK_M", "FP32", "stride_t"],
    )
    @triton.jit
    def _cross_attention(
        Q,
        T,
        Out,
        starts,
        lengths,
        stride_qb,
        stride_qm,
        stride_t,
        stride_ob,
        stride_om,
        key_col,
        value_col,
        M,
        scale,
        HEAD_DIM: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        FP32: tl.constexpr,
    ):
        """One (candidate, head): its queries in one tile, its key/value rows streamed in blocks of BLOCK_N with an
        online softmax (flash attention's recurrence)."""
        pid = tl.program_id(0)
        b = pid.to(tl.int64)
        h = tl.program_id(1)
        start = tl.load(starts + pid).to(tl.int64)
        length = tl.load(lengths + pid)
        m = tl.arange(0, BLOCK_M)
        d = tl.arange(0, HEAD_DIM)
        n = tl.arange(0, BLOCK_N)
        in_tile = m[:, None] < M
        q = tl.load(Q + b * stride_qb + m[:, None] * stride_qm + h * HEAD_DIM + d[None, :], mask=in_tile, other=0.0)
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
        for j in range(0, length, BLOCK_N):
            valid = (j + n) < length
            rows = (start + j + n).to(tl.int64)[:, None] * stride_t + h * HEAD_DIM + d[None, :]
            k = tl.load(T + rows + key_col, mask=valid[:, None], other=0.0).to(q.dtype)
            if FP32:  # 3xTF32: fp32's accuracy on the tensor cores (plain fp32 dot products ran on the CUDA cores)
                s = tl.dot(q, tl.trans(k), input_precision="tf32x3")
            else:
                s = tl.dot(q, tl.trans(k))
            s = tl.where(valid[None, :], s * scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            p = tl.exp(s - m_new[:, None])
            alpha = tl.exp(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(T + rows + value_col, mask=valid[:, None], other=0.0).to(q.dtype)
            if FP32:
                acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="tf32x3")
            else:
                acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m_i = m_new
        tl.store(
            Out + b * stride_ob + m[:, None] * stride_om + h * HEAD_DIM + d[None, :],
            (acc / l_i[:, None]).to(Out.dtype.element_ty),
            mask=in_tile,
        )
