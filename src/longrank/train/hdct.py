"""The ``hdct`` stage's command line (workflow/rules/hdct.smk): one job trains HDCT's encoder, weights every document
and indexes them (:func:`longrank.train.hdct_build.build`); with ``first_stages[].shards`` above 1, ``--train-encoder``,
``--shard i/N`` and ``--merge`` split that work over jobs (:mod:`longrank.train.hdct_shards`)."""

from __future__ import annotations

import json
from pathlib import Path

from longrank.data.collections import read_field
from longrank.data.corpus import Corpus
from longrank.errors import InputError
from longrank.mir_graphs.annotate import shard_argument
from longrank.runtime import add_device_arguments, stage_device
from longrank.train import hdct_build, hdct_shards


def add_arguments(parser) -> None:
    parser.add_argument("--data", required=True, help="results/{dataset}/data")
    parser.add_argument("--first-stage", required=True, help="the first_stages entry (method hdct) as JSON")
    parser.add_argument(
        "--dataset", help="the config's dataset block as JSON (targets titles reads the titles from it)"
    )
    parser.add_argument("--pseudo-queries", help="targets <set>: the pseudo_queries set's directory")
    add_device_arguments(parser)
    parser.add_argument("--out", required=True, help="results/{dataset}/hdct/{first stage name} (or the part's)")
    spread = parser.add_mutually_exclusive_group()  # first_stages[].shards above 1 (train/hdct_shards.py)
    spread.add_argument("--train-encoder", action="store_true", help="only train the encoder, for the shards")
    spread.add_argument("--shard", type=shard_argument, help="i/N: weight only shard i of N's documents")
    spread.add_argument("--merge", nargs="+", type=Path, help="the shards' directories, in order, indexed into --out")
    parser.add_argument("--encoder", type=Path, help="--shard, --merge: the trained encoder (--train-encoder's --out)")


def run(args) -> None:
    spec, out = json.loads(args.first_stage), Path(args.out)
    if (args.shard is not None or args.merge) and args.encoder is None:
        raise InputError("hdct: --shard and --merge read the trained encoder; give --encoder")
    if args.shard is not None:
        shard, shards = args.shard
        hdct_shards.weigh_shard(spec, Corpus(args.data), args.encoder, shard, shards, out, str(stage_device(args)))
        return
    if args.merge:
        hdct_shards.merge(spec, Corpus(args.data), args.encoder, args.merge, out)
        return
    titles = None
    if hdct_build.settings(spec).targets == "titles":
        if not args.dataset:
            raise InputError("hdct: targets titles needs --dataset (the collection to read titles from)")
        titles = read_field(json.loads(args.dataset), hdct_build.settings(spec).title_field)
    pseudo_dir = Path(args.pseudo_queries) if args.pseudo_queries else None
    train = hdct_shards.train_only if args.train_encoder else hdct_build.build
    train(spec, Corpus(args.data), out, titles, pseudo_dir, str(stage_device(args)))
