"""Stage ``artifacts``: build the per-document artifacts a model declares (its row of ``longrank.config.model_types``: ``artifacts``) for one scope.

- ``--scope collection``: built once from the data, without trained weights (the model is built from its
  config as training builds it); attached in training and reranking.
- ``--scope fold``: built from one fold's trained weights (``--checkpoint``); attached in reranking.

The documents are those of the candidates run (the documents the model will rerank), or the whole
collection without ``--candidates``. The model writes into a fresh temporary directory beside ``--out``,
which replaces ``--out`` only once the build has succeeded: a failed build leaves an earlier output as it was.
"""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from longrank.data.corpus import Corpus
from longrank.errors import InputError
from longrank.io.atomic import staged_directory
from longrank.io.trec_files import read_run
from longrank.models.checkpoint import load_model
from longrank.config.model_types import ARTIFACT_SCOPES, artifact_scopes, artifacts_of
from longrank.mir_graphs.annotate import shard_argument
from longrank.models import ndrm_impact_shards as impact_shards
from longrank.models.registry import build_model
from longrank.runtime import add_device_arguments, stage_device
from longrank.config.schema import schema_default

log = logging.getLogger(__name__)


def read_model_config(text: str) -> dict:
    """``--model-config``: inline JSON or a path to a JSON file."""
    if text.lstrip().startswith("{"):  # inline: never ask the file system (a long entry is no valid file name)
        try:
            return json.loads(text)
        except json.JSONDecodeError as err:
            raise InputError(f"--model-config: not valid JSON ({err})") from None
    try:
        return json.loads(Path(text).read_text())
    except (json.JSONDecodeError, OSError) as err:
        raise InputError(f"--model-config: {text!r} is neither inline JSON nor a readable JSON file ({err})") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model-config", required=True, help="the model's config entry as JSON (inline or a file)")
    parser.add_argument("--data", required=True, help="results/{dataset}/data")
    parser.add_argument(
        "--candidates", help="a TREC run: build for the documents it lists (default: the whole collection)"
    )
    parser.add_argument(
        "--scope",
        required=True,
        choices=ARTIFACT_SCOPES,
        help="collection: from the data; fold: from one fold's weights",
    )
    parser.add_argument("--checkpoint", help="the fold's trained weights (model.safetensors); --scope fold only")
    parser.add_argument("--batch-size", type=int, default=schema_default("rerank.batch_size"))
    add_device_arguments(parser)
    parser.add_argument(
        "--out", required=True, help="the artifact directory (artifacts/{model}/collection or .../fold{N})"
    )
    spread = parser.add_mutually_exclusive_group()  # impact_index.shards above 1 (models/ndrm_impact_shards.py)
    spread.add_argument("--shard", type=shard_argument, help="i/N: an impact index's shard i of N only")
    spread.add_argument("--merge", nargs="+", type=Path, help="the impact index's shards, in order, merged into --out")


def run(args) -> None:
    cfg = read_model_config(args.model_config)
    if args.batch_size < 1:
        raise InputError("--batch-size must be a positive integer")
    build(
        cfg,
        Corpus(args.data),
        args.scope,
        Path(args.out),
        args.checkpoint,
        args.candidates,
        args.batch_size,
        stage_device(args),
        Part(args.shard, args.merge),
    )


def documents(corpus: Corpus, candidates: str | Path | None) -> list[str]:
    """Sorted ids of the documents the candidates run lists (all of the collection's without one)."""
    if candidates is None:
        return sorted(corpus.docs)
    wanted = {d for ranking in read_run(candidates).values() for d in ranking}
    missing = wanted - corpus.docs.keys()
    if missing:
        raise InputError(f"--candidates lists documents not in the collection, e.g. {sorted(missing)[:3]}")
    return sorted(wanted)


@dataclass(frozen=True)
class Part:
    """What of an impact index a job builds: all of it (neither), shard ``(i, N)`` or the merge of ``merge``."""

    shard: tuple[int, int] | None = None
    merge: list[Path] | None = None


def _write(model, model_cfg: dict, scope: str, corpus, doc_ids, tmp: Path, checkpoint, batch_size, part: Part):
    """The artifacts into ``tmp``: the model's own build, or an impact index's shard or merge."""
    if part.shard is None and not part.merge:
        model.build_artifacts(scope, corpus, doc_ids, tmp, batch_size=batch_size)
        return
    if scope != "fold" or "impact_index" not in artifacts_of(model_cfg):
        raise InputError(
            f"config key impact_index.shards: a {model_cfg.get('type')!r} model's {scope} artifacts are built in one "
            "job (only an NDRM impact index is built in shards)"
        )
    origin = {"checkpoint": impact_shards.file_digest(checkpoint), "model": model_cfg}
    if part.shard is not None:
        impact_shards.write_shard(model, corpus, tmp, batch_size, *part.shard, origin)
    else:
        impact_shards.merge(model, corpus, part.merge or [], tmp, batch_size, origin)


def build(
    model_cfg: dict,
    corpus: Corpus,
    scope: str,
    out: Path,
    checkpoint: str | Path | None = None,
    candidates: str | Path | None = None,
    batch_size: int = schema_default("rerank.batch_size"),
    device="cpu",
    part: Part = Part(),
) -> None:
    kind = model_cfg.get("type")
    if scope not in artifact_scopes(model_cfg):
        raise InputError(f"artifacts: a {kind!r} model configured so declares no {scope!r} artifacts")
    if scope == "fold" and checkpoint is None:
        raise InputError("artifacts: --scope fold builds from a fold's trained weights; give --checkpoint")
    if scope == "collection" and checkpoint is not None:
        raise InputError("artifacts: --scope collection builds without trained weights; drop --checkpoint")
    model = (
        load_model(checkpoint, model_cfg, corpus, device)
        if checkpoint
        else build_model(model_cfg, corpus).to(device).eval()
    )
    doc_ids = documents(corpus, candidates)
    with staged_directory(out) as tmp:  # a shard's too: a half-written one never stands at its path
        _write(model, model_cfg, scope, corpus, doc_ids, tmp, checkpoint, batch_size, part)
    log.info("%s artifacts of a %s model for %d documents in %s", scope, kind, len(doc_ids), out)
