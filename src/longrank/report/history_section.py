"""Section: the experiment log. Every setting each model ran with and that its history keeps (``longrank.history``),
newest first, its scores beside today's, and what differs from today's setting, key by key. A setting that ran on
other data (changed judgments, documents, folds or candidates) says so first: its scores are of other data."""

from __future__ import annotations

import json
from pathlib import Path

from longrank.io.json_yaml import read_json
from longrank.report.context import Context
from longrank.report.html import Section
from longrank.report.inputs import PRIMARY
from longrank.tables import fmt

MAX_CHANGES = 6  # differing keys listed per row; the rest are counted


def section(ctx: Context) -> Section:
    sec = Section("Experiment log: earlier settings of each model")
    latest = {m: read_json(p) for m, p in ctx.inp.manifest.history.items()}
    if not latest:
        return sec.not_run("no model is configured, so no model has a history (rule history)")
    rows, sizes = [], []
    for model, pointer in latest.items():
        # the entries kept, newest first, as the history stage listed them (it wrote latest.json last)
        kept = [
            read_json(Path(ctx.inp.manifest.history[model]).parent / name / "settings.json") for name in pointer["kept"]
        ]
        current = next(k for k in kept if k["hash"] == pointer["current"])
        rows += [_row(model, archived, current) for archived in kept]
        sizes.append(f"{model} {pointer['bytes'] / 1e6:.1f} MB ({len(kept)} of at most {pointer['keep']})")
    earlier = sum(1 for r in rows if r[1] != "today")
    sec.howto(
        f"Each row is a setting a model ran with: its mean {PRIMARY} (and that of its interpolation with its first "
        "stage) on the test queries of the data it ran on, and how its setting differs from today's; a setting that "
        "ran on other data (documents, queries, judgments, folds or candidates) says so first. A changed "
        "setting keeps the earlier one's weights, runs and evaluations in results/<name>/history/<model>/<settings "
        "hash>/; going back to a kept setting copies its weights back instead of training again. "
        f"The config key history.keep bounds each model's entries (history now: {'; '.join(sizes)})."
    )
    if not earlier:
        sec.note("No model has run with another setting yet in this results folder: each row is today's setting.")
    sec.table(
        ["Model", "Setting", "Archived (UTC)", PRIMARY, f"{PRIMARY} interpolated", "Differs from today's in"], rows
    )
    return sec


def _row(model: str, archived: dict, current: dict) -> list:
    scores = archived["scores"]
    own = scores.get(model, {}).get(PRIMARY)
    mixed = next((s.get(PRIMARY) for name, s in scores.items() if name.startswith(f"{model}+")), None)
    today = archived["hash"] == current["hash"]
    changes = (
        [] if today else data_differences(archived, current) + changed_keys(archived["settings"], current["settings"])
    )
    shown = "; ".join(changes[:MAX_CHANGES]) + (
        f"; {len(changes) - MAX_CHANGES} more" if len(changes) > MAX_CHANGES else ""
    )
    return [
        model,
        "today" if today else archived["hash"],
        archived["archived"][:19].replace("T", " "),
        fmt(own),
        "–" if mixed is None else fmt(mixed),  # a model without an interpolation
        "–" if today else shown,
    ]


def data_differences(earlier: dict, today: dict) -> list[str]:
    """How the data an entry ran on differ from today's, said first: its scores are then of other data, not a
    setting's effect. Empty when the data are the same."""
    before, now = earlier.get("data"), today.get("data")
    if before is None or now is None:
        return ["ran on data not recorded (archived before entries kept their data): not comparable"]
    changed = [role for role in sorted(set(before) | set(now)) if before.get(role) != now.get(role)]
    return [f"ran on other data ({', '.join(changed)} differ): not comparable"] if changed else []


def changed_keys(earlier: dict, today: dict, prefix: str = "") -> list[str]:
    """The keys whose values differ, dotted (``entry.train.lr: 0.001 → 0.01``); a code digest is "changed"."""
    changes = []
    for key in sorted(set(earlier) | set(today)):
        name = f"{prefix}{key}"
        a, b = earlier.get(key, "(unset)"), today.get(key, "(unset)")
        if isinstance(a, dict) and isinstance(b, dict):
            changes += changed_keys(a, b, f"{name}.")
        elif a != b:
            changes.append(f"{name} changed" if name.startswith("code.") else f"{name}: {_short(a)} → {_short(b)}")
    return changes


def _short(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."
