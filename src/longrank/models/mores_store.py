"""MORES reuse store: document representations computed offline (Sec. 3.2) in one memory-mapped array
per collection. ``MORES.build_artifacts`` writes it (the ``artifacts`` stage, fold scope: it depends on a
fold's trained weights) and ``MORES.attach_artifacts`` opens it; the speed benchmark writes its own.

The store depends on the document module only (and for S2 on the IBs' K/V projections), so it is the
same for ``tie_query_layers: true`` and ``false``: with tied layers the query module runs the document
module's first L-K layers online, the store holds the document module's output as before.

Two files, ``STORE.npy`` and ``STORE.json`` (``store.npy`` and ``store.json`` in a fold's artifact directory):

- ``STORE.npy``: ``[total_tokens, slots, hidden]`` (float32 by default, the paper's "un-compressed"
  sizes; ``--dtype float16`` halves them). Reuse-S1 has one slot, D itself; Reuse-S2 has 2K slots, the
  key and value projections D W_k, D W_v of every Interaction Block (Eq. 11-12).
- ``STORE.json``: doc ids with their row offset and token count, the settings the rows depend on
  (``max_doc_len``, ``doc_segment_id``, hidden size, K), a fingerprint of the weights that made them (attaching a store to
  a model with other weights is refused), and the storage per document (Table 4, "Space").
  Written last: its presence marks a complete store.
"""

from __future__ import annotations

import hashlib
import logging
import warnings
from pathlib import Path

import numpy as np
import torch

from longrank.errors import InputError
from longrank.io.atomic import atomic_path
from longrank.io.json_yaml import read_json, write_json
from longrank.models.modules.doc_attention import DocRows, DocStates
from longrank.models.modules.encoders import pad
from longrank.config.schema import schema_default

log = logging.getLogger(__name__)

FORMAT = "longrank-mores-reuse/1"
DTYPES = {"float32": np.float32, "float16": np.float16}
LEGACY = {"doc_segment_id": 1}  # what a store written before the key was recorded was computed with


def slots(reuse: str, interaction_blocks: int) -> int:
    return 1 if reuse == "s1" else 2 * interaction_blocks


def weights_fingerprint(model, reuse: str) -> str:
    """Hash of the weights a stored row depends on: the document module, plus the IBs' key/value
    projections for Reuse-S2."""
    h = hashlib.blake2b(digest_size=16)
    modules = [("document_module", model.document_module)]
    if reuse == "s2":
        modules += [(f"ib{k}", ib.cross_attention.self) for k, ib in enumerate(model.interaction_blocks)]
    for prefix, module in modules:
        for name, tensor in sorted(module.state_dict().items()):
            if prefix.startswith("ib") and not name.startswith(("key.", "value.")):
                continue
            h.update(f"{prefix}.{name}".encode())
            h.update(tensor.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return h.hexdigest()


def mb_per_document(tokens: float, n_slots: int, hidden: int, dtype: str) -> float:
    return tokens * n_slots * hidden * np.dtype(DTYPES[dtype]).itemsize / 2**20


@torch.no_grad()
def write_store(
    model,
    doc_ids: list[str],
    docs: list[str] | list[list[int]],
    out: str | Path,
    reuse: str,
    dtype: str = "float32",
    batch_size: int = schema_default("rerank.batch_size"),
    device: torch.device | str = "cpu",
) -> dict:
    """Run the document module (and for S2 the IB projections) over ``docs``; write STORE.npy + STORE.json.
    ``docs`` are texts, or WordPiece id lists with special tokens already in place (the speed benchmark)."""
    _check_arguments(doc_ids, reuse, dtype)
    out = Path(out)
    model = model.to(device).eval()
    hidden, n_blocks = model.head.in_features, len(model.interaction_blocks)
    n_slots = slots(reuse, n_blocks)
    if docs and not isinstance(docs[0], str):
        encode = lambda batch: token_inputs(batch, model.tokenizer.pad_token_id, model.doc_segment_id)  # noqa: E731
    else:
        encode = model.encode_docs
    lengths = [
        int(m.sum())
        for start in range(0, len(docs), 4096)
        for m in encode(docs[start : start + 4096])["attention_mask"]
    ]
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) if lengths else np.zeros(0, np.int64)
    array_path = out.with_suffix(".npy")
    with atomic_path(array_path) as tmp:
        arr = np.lib.format.open_memmap(tmp, mode="w+", dtype=DTYPES[dtype], shape=(int(sum(lengths)), n_slots, hidden))
        _fill_rows(arr, model, docs, encode, lengths, offsets, reuse, batch_size, device)
        arr.flush()
        del arr
    meta = {
        "format": FORMAT,
        "reuse": reuse,
        "dtype": dtype,
        "array": array_path.name,
        "hidden_size": hidden,
        "interaction_blocks": n_blocks,
        "slots": n_slots,
        "max_doc_len": model.max_doc_len,
        "doc_segment_id": model.doc_segment_id,
        "fingerprint": weights_fingerprint(model, reuse),
        "documents": len(doc_ids),
        "tokens": int(sum(lengths)),
        **_sizes(lengths, n_slots, hidden, dtype),
        "doc_ids": list(doc_ids),
        "offsets": offsets.tolist(),
        "lengths": lengths,
    }
    write_json(out, meta)
    return meta


def _check_arguments(doc_ids: list[str], reuse: str, dtype: str) -> None:
    if reuse not in {"s1", "s2"}:
        raise InputError(f"reuse: a reuse store needs 's1' or 's2', got {reuse!r}")
    if dtype not in DTYPES:
        raise InputError(f"dtype: expected one of {sorted(DTYPES)}, got {dtype!r}")
    if len(set(doc_ids)) != len(doc_ids):
        raise InputError("reuse store: duplicate document ids")


def _fill_rows(arr, model, docs, encode, lengths: list[int], offsets, reuse: str, batch_size: int, device) -> None:
    """Each document's token rows (its representations, or for S2 its IB keys and values) at its offset in
    ``arr``, computed in batches of similar lengths (less padding)."""
    order = sorted(range(len(docs)), key=lambda i: lengths[i])
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        d = {k: v.to(device) for k, v in encode([docs[i] for i in idx]).items()}
        rep = model.represent_docs(**d)
        parts = [rep] if reuse == "s1" else [t for kv in model.project_docs(rep) for t in kv]
        rows = torch.stack(parts, dim=2).to("cpu", torch.float32).numpy()  # [B, L, slots, hidden]
        for j, i in enumerate(idx):
            arr[offsets[i] : offsets[i] + lengths[i]] = rows[j, : lengths[i]]


def _sizes(lengths: list[int], n_slots: int, hidden: int, dtype: str) -> dict:
    return {
        "mb_per_document_mean": mb_per_document(float(np.mean(lengths)) if lengths else 0.0, n_slots, hidden, dtype),
        # Table 4 "Space": storage per document of exactly 128 / 512 tokens
        "mb_per_document_at": {str(n): mb_per_document(n, n_slots, hidden, dtype) for n in (128, 512)},
    }


def token_inputs(seqs: list[list[int]], pad_id: int, segment: int) -> dict[str, torch.Tensor]:
    """Document-module inputs from id lists that already carry [CLS] ... [SEP]; ``segment``: the model's
    ``doc_segment_id``."""
    ids, mask = pad(seqs, pad_id)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": mask * segment}


class ReuseStore:
    """The store's rows, read for a batch of documents with one indexed copy (``doc_kv``): the documents' token
    rows are gathered at once from the memory map, or from a copy resident in (GPU) memory, so scoring a batch
    costs no Python work per document beyond looking its id up."""

    def __init__(self, meta: dict, array: np.ndarray | torch.Tensor):
        self.meta, self.array = meta, array
        self.index = {d: i for i, d in enumerate(meta["doc_ids"])}
        self.offsets = torch.tensor(meta["offsets"], dtype=torch.long)
        self.lengths = torch.tensor(meta["lengths"], dtype=torch.long)
        self.host_lengths = self.lengths  # stays on the host: a batch's longest document without a device sync
        self._host_table: torch.Tensor | None = None  # the memory map as a torch table, made on first CPU read

    @classmethod
    def open(cls, path, model=None) -> ReuseStore:
        path = Path(path)
        try:
            meta = read_json(path)
        except FileNotFoundError:
            raise InputError(f"reuse store {path} not found; build it with `longrank artifacts --scope fold`") from None
        if meta.get("format") != FORMAT:
            raise InputError(f"{path} is not a MORES reuse store (format {meta.get('format')!r})")
        array = np.load(path.with_name(meta["array"]), mmap_mode="r")
        store = cls(meta, array)
        if model is not None:
            store.check(model, path)
        return store

    def check(self, model, path) -> None:
        m = self.meta
        expected = {
            "hidden_size": model.head.in_features,
            "interaction_blocks": len(model.interaction_blocks),
            "max_doc_len": model.max_doc_len,
            "doc_segment_id": model.doc_segment_id,
        }
        for key, value in expected.items():
            stored = m.get(key, LEGACY.get(key))
            if stored != value:
                raise InputError(
                    f"reuse store {path}: {key} is {stored} but the model has {value}; rebuild the fold's artifacts"
                )
        if m["fingerprint"] != weights_fingerprint(model, m["reuse"]):
            raise InputError(
                f"reuse store {path} was computed from other weights than this model's; rebuild the fold's artifacts"
            )

    def resident(self, device, dtype: torch.dtype | None = None) -> ReuseStore:
        """The store held in ``device`` memory (in ``dtype``: bfloat16 / float16 halve it; default the file's).
        The paper's GPU timings prefetch documents to the GPU on a separate CUDA stream (its footnote 5): 1,000
        candidates of 12 MB cannot cross PCIe in its 0.1 s, so what it times is the compute with the store already
        on the GPU, which a resident store measures."""
        array = torch.tensor(self.array, device=device)  # a copy: the memory map stays read-only
        store = ReuseStore(self.meta, array if dtype is None else array.to(dtype))
        store.offsets, store.lengths = self.offsets.to(device), self.lengths.to(device)
        store.host_lengths = self.host_lengths
        return store

    def rows_of(self, doc_ids: list[str]) -> torch.Tensor:
        """The store's row numbers of ``doc_ids`` (a caller that scores the same documents again keeps them)."""
        try:
            return torch.tensor([self.index[d] for d in doc_ids], dtype=torch.long)
        except KeyError as err:
            raise InputError(
                f"document {err.args[0]!r} is not in the reuse store; build the store from candidates that list it"
            ) from None

    def doc_kv(
        self, doc_ids: list[str] | torch.Tensor, model, device, dtype: torch.dtype = torch.float32
    ) -> tuple[list[tuple[torch.Tensor, torch.Tensor]] | DocRows | DocStates, torch.Tensor | None]:
        """Per-IB (keys, values) in ``dtype`` and the key mask for ``doc_ids`` (or their ``rows_of``), gathered
        with one indexed copy from the memory map (or the resident copy); for Reuse-S1 the states themselves with
        their mask (``DocStates``: the blocks attend over them unprojected, ``mores_interaction.attend_states``). Padded
        positions read the store's row 0: the mask keeps attention off them, so they need no zeroing.

        Where the model reads a store in place (``model.reads_store_rows``: inference with the fused kernel on CUDA,
        or on the CPU), a Reuse-S2 store on the scoring device is not copied at all: its rows are read where they
        lie (``DocRows``, no mask): a resident copy, or on the CPU the memory map itself (the gathered copy was
        0.4 of 1.8 ms a candidate, MiniLM at 512 tokens on 2 threads). A store on the host scored on CUDA is
        gathered and moved as before, then handed over as rows too."""
        rows = doc_ids if isinstance(doc_ids, torch.Tensor) else self.rows_of(doc_ids)
        on_device = isinstance(self.array, torch.Tensor)
        host_rows = rows.cpu()
        longest = int(self.host_lengths[host_rows].max())
        if rows.device.type == "cpu" and self.offsets.device.type == "cuda":
            # from pinned memory without blocking: a plain copy from pageable memory waits for the GPU's queued work
            # (the query module), and the GPU then idles while Python prepares the blocks (1.5 ms of a 5.9 ms bf16
            # Reuse-S2 pass on an H100, docs/studies/speed.md, "MORES on the GPU")
            rows = rows.pin_memory().to(self.offsets.device, non_blocking=True)
        else:
            rows = rows.to(self.offsets.device)
        offsets, lengths = self.offsets[rows], self.lengths[rows]
        n_blocks, hidden = self.meta["interaction_blocks"], self.meta["hidden_size"]
        fused = model.reads_rows(device)
        table = self._rows_table(device) if self.meta["reuse"] == "s2" and model.reads_store_rows(device) else None
        if table is not None:
            cols = [2 * k * hidden for k in range(n_blocks)]
            values = [c + hidden for c in cols]
            # resident: the same table on every call, so a CUDA graph of the blocks may keep reading it
            in_place = DocRows(
                table, offsets, lengths.to(torch.int32), cols, values, hidden, longest, resident=on_device
            )
            return in_place, None
        steps = torch.arange(longest, device=rows.device)
        mask = steps[None, :] < lengths[:, None]
        positions = torch.where(mask, offsets[:, None] + steps[None, :], 0)
        if on_device:
            batch = self.array[positions]
        else:
            batch = torch.from_numpy(np.take(self.array, positions.numpy(), axis=0))
        t = batch.to(device=device, dtype=dtype, non_blocking=True)
        mask = mask.to(device=device, dtype=torch.long)
        if self.meta["reuse"] == "s1":  # the blocks attend over the states without projecting them
            return DocStates(t[:, :, 0], mask), None
        if fused:
            return DocRows.from_dense(t.reshape(*t.shape[:2], -1), mask, n_blocks), None
        return [(t[:, :, 2 * k], t[:, :, 2 * k + 1]) for k in range(n_blocks)], mask

    def _rows_table(self, device) -> torch.Tensor | None:
        """The store as a ``[tokens, slots x hidden]`` table on ``device``, to read rows in place: the resident copy
        there, or for the CPU the memory map itself; ``None`` where the store is on another device."""
        if isinstance(self.array, torch.Tensor):
            return self.array.view(self.array.shape[0], -1) if _same_device(self.array.device, device) else None
        if torch.device(device).type != "cpu":
            return None
        if self._host_table is None:
            with warnings.catch_warnings():  # torch warns that the map is read-only: nothing writes through it
                warnings.simplefilter("ignore", UserWarning)
                self._host_table = torch.from_numpy(self.array.reshape(self.array.shape[0], -1))
        return self._host_table


def _same_device(a: torch.device, b) -> bool:
    """``cuda:0`` and ``cuda`` (the current device) are one device."""
    b = torch.device(b)
    if b.type == "cuda" and b.index is None:
        b = torch.device("cuda", torch.cuda.current_device())
    return a == b
