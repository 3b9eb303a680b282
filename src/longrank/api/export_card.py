"""The model card (``README.md``) of an exported ranker (:mod:`longrank.api.export`): what trained it, on what, how well
it did, its configuration and the directory's files, written from its ``ranker.json`` and training summary."""

from __future__ import annotations

import json


def card(meta: dict, summary: dict | None, test: dict[str, float], fold: dict) -> str:
    """The card of ``meta``'s ranker (its ``ranker.json``): ``summary`` its train_summary.json (None: none), ``test``
    system -> mean test nDCG@10 on ``fold``'s test queries."""
    lines = [
        f"# {meta['name']} (LongRank {meta['type']})",
        "",
        f"A `{meta['class']}` re-ranker trained by LongRank {meta['longrank_version']} (commit `{meta['longrank_commit']}`), "
        "exported with `longrank export`. Load it with `longrank.load_ranker(DIR)` or rerank a run with "
        "`longrank rerank --ranker DIR --run RUN --queries Q --docs DOCS --out OUT`.",
        "",
        "## Training data",
        "",
        f"- collection: `{meta['source']['dataset']}` ({meta['source'].get('num_docs', '?')} documents)",
        f"- fold {meta['source']['fold']}: {len(fold.get('train', []))} training, {len(fold.get('dev', []))} dev and "
        f"{len(fold.get('test', []))} test queries",
        f"- first stage it was trained on: `{meta['source'].get('first_stage') or 'the config default'}`",
        "",
        "## Training",
        "",
        *_training_lines(meta, summary, test),
        "",
        "## Configuration",
        "",
        "```json",
        _json(meta["config"]),
        "```",
        "",
        "## Files",
        "",
        *_file_lines(meta),
    ]
    if meta.get("notes"):
        lines += ["", "## Notes", "", *[f"- {n}" for n in meta["notes"]]]
    return "\n".join(lines) + "\n"


def _training_lines(meta: dict, summary: dict | None, test: dict[str, float]) -> list[str]:
    """The card's training section: the steps and dev figure, the test figures, the interpolation weights."""
    train = meta["config"].get("train", {})
    if summary:
        lines = [
            f"- steps: {summary.get('steps_run')} of {train.get('steps', summary.get('hyperparameters', {}).get('steps'))}, "
            f"best at step {summary.get('best_step')}{' (stopped early)' if summary.get('stopped_early') else ''}",
            f"- dev nDCG@10 (best): {summary.get('best_dev_ndcg10', float('nan')):.4f}",
        ]
        if summary.get("note"):
            lines.append(f"- note: {summary['note']}")
    else:
        lines = ["- no train_summary.json was found beside the weights"]
    lines += [
        f"- test nDCG@10 ({system}, this fold's test queries): {value:.4f}" for system, value in test.items()
    ] or ["- test nDCG@10: not evaluated (no eval/<model>.tsv in the results)"]
    for first_stage, chosen in (meta.get("interpolation") or {}).items():
        lines.append(
            f"- `{meta['name']}+{first_stage}`: weight {chosen['weight']} on the model's min-max normalised scores, "
            f"{1 - chosen['weight']:.2g} on `{first_stage}`'s, chosen on {chosen['chosen_on']}; reproduce it with "
            f"`longrank rerank --ranker DIR --run <{first_stage}'s run> ... --interpolate {first_stage}` "
            f'(`load_ranker(DIR).rerank(run, queries, docs, interpolate="{first_stage}")`)'
        )
    return lines


def _file_lines(meta: dict) -> list[str]:
    """The card's list of the directory's files."""
    lines = [
        "- `model.safetensors`, `model.manifest.json`: the weights and their size and SHA-256",
        "- `ranker.json`: type, class, the resolved config entry, provenance, collection statistics",
    ]
    if meta.get("vocabulary"):
        lines.append("- `vocabulary.tsv`: the model's words and document frequencies (with `num_docs`: its IDF)")
        if meta["vocabulary"].get("pretrained_count") is not None:
            vocab = meta["vocabulary"]
            lines.append(
                f"- `{vocab['pretrained_words']}`, `{vocab['pretrained_vectors']}`: the other "
                f"{vocab['pretrained_count']} words of `{vocab['pretrained_source']}` and their vectors "
                f"({vocab['pretrained_dtype']}), so that new text's words are known (document frequency 0: the "
                "training collection lacked them)"
            )
    if meta.get("encoder"):
        lines.append("- `encoder/`: the fine-tuned encoder and tokenizer (`transformers.AutoModel.from_pretrained`)")
    return lines


def _json(obj) -> str:
    return json.dumps(obj, indent=2, sort_keys=True)
