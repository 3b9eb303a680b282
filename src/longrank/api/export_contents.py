"""What an export directory holds, read as data, never as instructions, and the model built from it: every path
``ranker.json`` names stays inside the export's own folder, and every size is checked against the weights file's
header (safetensors: shapes without the tensors) before a model of that size is built. Errors name the key and the
file, never a line of a file's content. Word models are built over the exported vocabulary (training words first,
ids as at training, then the pre-trained words), encoder models over the exported encoder."""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from collections.abc import Sequence
from typing import Any

from longrank.errors import InputError


class _ExportedCollection:
    """What a word model reads of a collection when it is built (``WordEmbedder.for_corpus``): its vocabulary,
    here the exported one, whatever filter keys the config entry names (it was cut by them already)."""

    def __init__(self, directory: Path, vocab):
        self.dir, self.vocab = directory, vocab

    def word_vocabulary(self, min_doc_freq: int = 1, max_words: int | None = None):
        return self.vocab


# An export is data, never instructions: every path in ranker.json names a file inside the export's own folder, and
# every size is checked against the weights file's header (safetensors: shapes without the tensors) before a model of
# that size is built. Errors name the key and the file, never a line of a file's content.
#: the parts of an export ranker.json names by path, as (key, what it must be)
EXPORT_PATHS = (
    ("vocabulary.file", "file"),
    ("vocabulary.pretrained_words", "file"),
    ("vocabulary.pretrained_vectors", "file"),
    ("encoder.dir", "directory"),
)
#: encoder config.json keys that size tensors; each must be a dimension of some tensor the encoder's weights hold
ENCODER_SIZES = ("vocab_size", "hidden_size", "intermediate_size", "max_position_embeddings", "type_vocab_size")


def inside_export(directory: Path, meta: dict, key: str, kind: str) -> Path:
    """The path ``ranker.json``'s ``key`` (``vocabulary.file``) names, resolved inside ``directory`` (symlinks
    followed): an absolute path, a ``..`` or a link out of the folder is refused naming the key."""
    section, field = key.split(".")
    value = meta[section].get(field) if isinstance(meta.get(section), dict) else None
    return inside_folder(directory, value, f"{directory / 'ranker.json'}: {key}", kind)


def inside_folder(directory: Path, value, where: str, kind: str) -> Path:
    if not isinstance(value, str) or not value:
        raise InputError(f"{where}: expected the relative path of a {kind} inside the export, got {value!r}")
    root = directory.resolve()
    path = (root / value).resolve()
    if Path(value).is_absolute() or ".." in Path(value).parts or not path.is_relative_to(root):
        raise _outside(directory, value, where)
    if not (path.is_dir() if kind == "directory" else path.is_file()):
        raise InputError(f"{where}: {value!r} is not a {kind} of the export {directory}")
    return path


def _outside(directory: Path, value: str, where: str) -> InputError:
    return InputError(
        f"{where}: {value!r} is not inside the export's folder {directory}; an export names only its own files "
        "(a relative path without '..', no link out of the folder)"
    )


def check_all_inside(directory: Path, meta: dict) -> None:
    """Every path of the export, at any depth (``encoder/tokenizer.json`` as much as ``ranker.json``), resolves
    inside its folder: a link out of it, to a file or a folder, is refused naming the key of ``ranker.json`` that
    names it, else its path in the export. Links to folders are not walked into: each is checked as a name, so a
    link that leads out is refused before anything below it is read."""
    root = directory.resolve()
    keys: dict[str, str] = {}  # a path inside the export -> the ranker.json key that names it
    for key, _ in EXPORT_PATHS:
        section, field = key.split(".")
        value = meta.get(section, {}).get(field) if isinstance(meta.get(section), dict) else None
        if isinstance(value, str):
            keys[os.path.normpath(value)] = key
    for folder, dirs, files in os.walk(root):
        for name in sorted(dirs + files):
            path = Path(folder) / name
            if path.is_symlink() and not path.resolve().is_relative_to(root):
                relative = str(path.relative_to(root))
                named_by = keys.get(relative)
                where = f"{directory / 'ranker.json'}: {named_by}" if named_by else str(directory)
                raise _outside(directory, relative, where)


# The least bound on a config's whole numbers: a limit such as max_vocabulary: 1,000,000 on a KNRM of 350k weights is
# valid, and a layer of 10**7 is built in well under a GB
SIZE_FLOOR = 10**7


def check_config_sizes(directory: Path, cfg: dict, weights: list[Path]) -> None:
    """Every whole number the config entry gives its architecture (at any depth) is at most the number of weights
    the export holds (the safetensors headers' shapes): a size beyond that is the size of nothing the weights fill,
    and building it (``n_kernels: 10**8``: a list and a layer of 10**8) would exhaust memory before the weights'
    shapes were compared. The bound is at least ``SIZE_FLOOR``: limits that size no layer (``max_vocabulary``,
    ``max_doc_len``) may exceed a small model's weights, and building anything of 10**7 fits in memory."""
    from longrank.config.model_types import architecture_params

    total = sum(math.prod(shape) for path in weights for shape in weight_shapes(path).values())
    for key, value in _whole_numbers(architecture_params(cfg)):
        if value > max(total, SIZE_FLOOR):
            raise InputError(
                f"{directory / 'ranker.json'}: config.{key} {value} is more than the {total} weights the export "
                "holds, so it is the size of none of them; nothing was built"
            )


def _whole_numbers(value, prefix: str = ""):
    """(dotted key, whole number) for each whole number in a config value, at any depth (``dims.0`` in a list)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _whole_numbers(item, f"{prefix}{key}.")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _whole_numbers(item, f"{prefix}{index}.")
    elif isinstance(value, int) and not isinstance(value, bool):
        yield prefix.rstrip("."), value


def _whole_number(value, where: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"{where}: expected a whole number >= {minimum}, got {value!r}")
    return value


def weight_shapes(path: Path) -> dict[str, list[int]]:
    """Each tensor's shape from a safetensors file's header (no tensor is read)."""
    from safetensors import SafetensorError, safe_open

    from longrank.io.text_files import check_regular_file

    check_regular_file(path)
    try:
        with safe_open(str(path), framework="pt") as f:
            # safe_open is no mapping: it lists its tensors by keys() and cannot be iterated
            return {name: list(f.get_slice(name).get_shape()) for name in f.keys()}  # noqa: SIM118
    except SafetensorError as err:
        raise InputError(f"{path} is not a safetensors file ({err}); weights are only read from safetensors") from None


def check_vocabulary_sizes(directory: Path, meta: dict) -> None:
    """``vocabulary.words`` and ``vocabulary.embedding_dim`` against the embedding matrix in ``model.safetensors``
    ([words + 2, embedding_dim]: padding and the unknown word come first), before the embedder is built."""
    from longrank.api.export import WEIGHTS

    vocab = meta["vocabulary"]
    where = directory / "ranker.json"
    words = _whole_number(vocab.get("words"), f"{where}: vocabulary.words")
    dim = _whole_number(vocab.get("embedding_dim"), f"{where}: vocabulary.embedding_dim")
    _whole_number(vocab.get("num_docs"), f"{where}: vocabulary.num_docs")
    shapes = weight_shapes(directory / WEIGHTS)
    matrix = next((shape for name, shape in shapes.items() if name.endswith("embedder.embedding.weight")), None)
    if matrix is None:
        raise InputError(f"{directory / WEIGHTS}: no word embedding matrix (embedder.embedding.weight) for vocabulary")
    if matrix != [words + 2, dim]:
        raise InputError(
            f"{where}: vocabulary.words {words} and vocabulary.embedding_dim {dim} do not match the embedding matrix of "
            f"{directory / WEIGHTS} ({matrix[0]} x {matrix[1]}: {matrix[0] - 2} words and their padding and unknown "
            "rows); nothing was built"
        )
    if "pretrained_vectors" in vocab:
        count = _whole_number(vocab.get("pretrained_count"), f"{where}: vocabulary.pretrained_count", minimum=0)
        path = inside_export(directory, meta, "vocabulary.pretrained_vectors", "file")
        found = weight_shapes(path).get("vectors")
        if found != [count, dim]:
            raise InputError(
                f"{where}: vocabulary.pretrained_count {count} and vocabulary.embedding_dim {dim} do not match "
                f"{path} (its vectors: {found}); nothing was built"
            )


def check_encoder_sizes(directory: Path, encoder: Path) -> None:
    """The encoder's ``config.json`` sizes against its own weights' header: each size key must be a dimension of
    some tensor (a hidden_size of 10**9 matches none), the layers no more than the tensors; checked before
    transformers builds (allocates) the model."""
    from longrank.io.json_yaml import read_json

    weights = encoder / "model.safetensors"
    if not weights.is_file():
        raise InputError(
            f"{encoder}: no model.safetensors; an export's encoder is read only from safetensors (never unpickled)"
        )
    config_path = encoder / "config.json"
    config = read_json(config_path) if config_path.is_file() else None
    if not isinstance(config, dict):
        raise InputError(f"{config_path}: expected the encoder's config (a JSON object)")
    shapes = weight_shapes(weights)
    dims = {d for shape in shapes.values() for d in shape}
    for key in ENCODER_SIZES:
        if key in config and config[key] not in dims:
            raise InputError(
                f"{config_path}: {key} {config[key]!r} is the size of no tensor in {weights}; nothing was built"
            )
    layers = config.get("num_hidden_layers", 0)
    if not isinstance(layers, int) or layers > len(shapes):
        raise InputError(
            f"{config_path}: num_hidden_layers {layers!r} is more than {weights} holds tensors ({len(shapes)})"
        )


def _read_pretrained(directory: Path, meta: dict) -> tuple[list[str], Any]:
    """The export's pre-trained words beyond the training vocabulary and their vectors (float32), or none."""
    import torch
    from safetensors.torch import load_file

    from longrank.io.text_files import numbered_lines

    if "pretrained_words" not in meta:
        return [], None
    path = inside_export(directory, {"vocabulary": meta}, "vocabulary.pretrained_words", "file")
    words: list[str] = []
    for lineno, line in numbered_lines(path):
        word = line.rstrip("\n")
        if not word or len(words) == meta["pretrained_count"]:
            raise InputError(
                f"{path}:{lineno}: {'an empty line' if not word else 'more words than vocabulary.pretrained_count'}"
            )
        words.append(word)
    if len(words) != meta["pretrained_count"]:
        raise InputError(f"{path}: {len(words)} words; vocabulary.pretrained_count says {meta['pretrained_count']}")
    vectors = load_file(str(inside_export(directory, {"vocabulary": meta}, "vocabulary.pretrained_vectors", "file")))
    return words, vectors["vectors"].to(torch.float32)


def _read_vocabulary(directory: Path, meta: dict, pretrained: Sequence[str] = ()):
    """The training vocabulary (ids as at training), then the export's ``pretrained`` words (document frequency 0,
    as a query word the training collection lacked)."""
    from longrank.data.words import Vocabulary
    from longrank.io.text_files import numbered_lines

    path = inside_export(directory, {"vocabulary": meta}, "vocabulary.file", "file")
    words: list[str] = []
    freqs: list[int] = []
    for lineno, line in numbered_lines(path):
        if lineno == 1:
            continue
        # the message describes the line, never quotes it: a file's lines are not for echoing
        word, sep, df = line.rstrip("\n").partition("\t")
        if not sep or not df.isdigit():
            raise InputError(
                f"{path}:{lineno}: expected word<TAB>document frequency (a whole number); this line has "
                f"{'no tab' if not sep else 'no whole number after its tab'}"
            )
        if len(words) == meta["words"]:
            raise InputError(f"{path}:{lineno}: more words than vocabulary.words ({meta['words']}) in ranker.json")
        words.append(word)
        freqs.append(int(df))
    if len(words) != meta["words"]:
        raise InputError(f"{path}: {len(words)} words; vocabulary.words in ranker.json says {meta['words']}")
    known = set(words)
    if any(w in known for w in pretrained):
        raise InputError(f"{path}: a pre-trained word of the export is also a training word; export the model again")
    return Vocabulary(words + list(pretrained), freqs + [0] * len(pretrained), int(meta["num_docs"]))


def build_exported_model(directory: Path, meta: dict):
    """The model the directory describes, untrained (its weights are loaded after), and a word model's pre-trained
    vectors of the words after its training vocabulary (None: none): word models over the exported vocabulary
    (training words first, ids as at training), encoder models over the exported encoder."""
    from longrank.api.export import WEIGHTS
    from longrank.models.registry import build_model

    cfg = meta.get("config")
    if not isinstance(cfg, dict) or not isinstance(cfg.get("type", cfg.get("class")), str):
        raise InputError(f"{directory / 'ranker.json'}: config: expected the model's config entry with its type")
    cfg = dict(cfg)
    if "vocabulary" in meta:
        check_vocabulary_sizes(directory, meta)
        check_config_sizes(directory, cfg, [directory / WEIGHTS])
        pretrained, vectors = _read_pretrained(directory, meta["vocabulary"])
        vocab = _read_vocabulary(directory, meta["vocabulary"], pretrained)
        # The initial vectors (GloVe, word2vec) are overwritten by the trained weights: a one-word file of the right
        # width stands in for them, so neither the vectors' package nor the collection's word2vec file is needed.
        with tempfile.TemporaryDirectory(prefix="longrank-ranker-") as tmp:
            stub = Path(tmp) / "width.txt"
            stub.write_text("<width> " + " ".join(["0"] * int(meta["vocabulary"]["embedding_dim"])) + "\n")
            model = build_model({**cfg, "embeddings": str(stub)}, _ExportedCollection(directory, vocab))
        if model.embedder.vocab.words != vocab.words:
            raise InputError(
                f"{directory}: the model's vocabulary differs from {meta['vocabulary']['file']} "
                "(its config entry cuts it again); export the model again"
            )
        return model, vectors
    if "encoder" in meta:
        encoder = inside_export(directory, meta, "encoder.dir", "directory")
        check_encoder_sizes(directory, encoder)
        check_config_sizes(directory, cfg, [directory / WEIGHTS, encoder / "model.safetensors"])
        return build_model({**cfg, "encoder": str(encoder)}, None), None
    raise InputError(f"{directory / 'ranker.json'}: names neither a vocabulary nor an encoder")
