"""Stage ``compare``: significance letters, effect sizes, bootstrap CIs and non-inferiority across systems.

Reads ``{eval-dir}/{system}.tsv`` (written by ``evaluate``) for the systems in the given order; letters
a, b, c, ... follow that order. Writes, atomically, into ``--out-dir``:

- ``table.csv``  system, letter, measure, mean, ci_low, ci_high, better_than (letters), n_queries
- ``pairs.csv``  measure, system_a, system_b, mean_diff (a - b), diff_ci_low/high, cohens_d,
                 wilcoxon_p, wilcoxon_p_holm, ttest_p, ttest_p_holm, mean_a, mean_b
- ``noninferiority.csv`` (only with ``--reference``) measure, system, reference, margin, ..., p, verdict
- ``table.md``, ``table.tex``  Table 1 style, superscript letters from the Holm-corrected Wilcoxon test
- ``settings.json``  the test settings and query count, for the report

With ``--pairs A:B ...`` it compares those pairs only, as a Holm family of their own, and writes only ``pairs.csv``
and ``settings.json``: the sanity stage's floors against the models that must beat them
(workflow/rules/evaluate.smk, rule ``compare_floors``), kept out of the table's family so that they change no
p-value there.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from longrank.evaluate.metrics import read_eval_tsv
from longrank.evaluate.significance import compare, compare_pairs, smallest_holm_wilcoxon_p
from longrank.evaluate.comparison_tables import PAIRS_FILE, ComparisonTables, write_csv
from longrank.errors import InputError
from longrank.io.atomic import write_text
from longrank.results.stage_outputs import CompareSettings
from longrank.tables import LETTER_NOTE, effectiveness_rows, to_latex, to_markdown
from longrank.config.schema import schema_default

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--eval-dir", required=True, help="directory with {system}.tsv per-query evaluations")
    parser.add_argument("--systems", nargs="+", required=True, help="systems in table order (letters a, b, c, ...)")
    parser.add_argument("--reference", default=None, help="reference system for the non-inferiority test (MORES §4.1)")
    parser.add_argument(
        "--margins",
        nargs="+",
        type=float,
        default=schema_default("evaluation.margins"),
        help="non-inferiority margins as fractions of the reference mean (default: %(default)s)",
    )
    parser.add_argument("--alpha", type=float, default=schema_default("evaluation.alpha"))
    parser.add_argument(
        "--bootstrap",
        type=int,
        default=schema_default("evaluation.bootstrap"),
        help="bootstrap resamples (default: %(default)s)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--measures", nargs="+", default=None, help="measures to compare (default: all columns)")
    parser.add_argument(
        "--pairs",
        nargs="+",
        default=None,
        metavar="A:B",
        help="compare only these pairs of --systems (one Holm family); writes pairs.csv and settings.json",
    )
    parser.add_argument("--out-dir", required=True)


def write_outputs(out_dir: str | Path, result: ComparisonTables, settings: CompareSettings) -> None:
    out = Path(out_dir)
    result.write(out)
    headers, rows = effectiveness_rows(result.table, settings.systems, settings.measures)
    note = LETTER_NOTE.format(alpha=settings.alpha) + f" {settings.n_queries} queries."
    write_text(out / "table.md", to_markdown(headers, rows) + "\n" + note + "\n")
    write_text(out / "table.tex", to_latex(headers, rows, caption="Effectiveness. " + note, label="tab:effectiveness"))
    settings.write(out / "settings.json")


def run(args: argparse.Namespace) -> None:
    if len(set(args.systems)) != len(args.systems):
        raise InputError(f"--systems lists a system twice: {args.systems}")
    eval_dir = Path(args.eval_dir)
    frames = {s: read_eval_tsv(eval_dir / f"{s}.tsv") for s in args.systems}
    if args.pairs is not None:
        run_pairs(args, frames)
        return
    result = compare(frames, args.measures, args.reference, args.margins, args.alpha, args.bootstrap, args.seed)
    measures = list(dict.fromkeys(result.table["measure"]))
    n_queries = int(result.table["n_queries"].iloc[0]) if len(result.table) else 0
    n_pairs = len(args.systems) * (len(args.systems) - 1) // 2  # Holm's family: every pair of one measure
    settings = CompareSettings(
        systems=list(args.systems),
        measures=measures,
        reference=args.reference,
        margins=list(args.margins),
        alpha=args.alpha,
        bootstrap=args.bootstrap,
        seed=args.seed,
        n_queries=n_queries,
        letters_test="two-sided paired Wilcoxon signed-rank, Holm-corrected across all pairs per measure",
        noninferiority_test="one-sided paired t-test of H0: mean(sys) - mean(ref) <= -margin * mean(ref)",
        smallest_p_holm=smallest_holm_wilcoxon_p(n_queries, n_pairs),
    )
    write_outputs(args.out_dir, result, settings)
    log.info(
        "compared %d systems on %d queries; letters from Holm-corrected Wilcoxon p < %s; wrote %s",
        len(args.systems),
        n_queries,
        args.alpha,
        args.out_dir,
    )


def parse_pairs(texts: list[str], systems: list[str]) -> list[tuple[str, str]]:
    pairs = []
    for text in texts:
        a, sep, b = text.partition(":")
        if not sep or not a or not b:
            raise InputError(f"--pairs: {text!r} is not A:B (two systems of --systems joined by ':')")
        absent = [s for s in (a, b) if s not in systems]
        if absent:
            raise InputError(f"--pairs: {text!r} names {absent}, not in --systems {systems}")
        pairs.append((a, b))
    return pairs


def run_pairs(args: argparse.Namespace, frames: dict) -> None:
    """Only the given pairs, Holm-corrected among themselves: pairs.csv and settings.json."""
    pairs = parse_pairs(args.pairs, list(args.systems))
    result = compare_pairs(frames, pairs, args.measures, args.bootstrap, args.seed)
    n_queries = len(next(iter(frames.values()))) if frames else 0
    settings = CompareSettings(
        systems=list(args.systems),
        measures=list(dict.fromkeys(result["measure"])),
        reference=None,
        margins=[],
        alpha=args.alpha,
        bootstrap=args.bootstrap,
        seed=args.seed,
        n_queries=n_queries,
        letters_test="two-sided paired Wilcoxon signed-rank, Holm-corrected across the given pairs per measure",
        noninferiority_test="",
        smallest_p_holm=smallest_holm_wilcoxon_p(n_queries, len(pairs)),
    )
    out = Path(args.out_dir)
    write_csv(out / PAIRS_FILE, result)
    settings.write(out / "settings.json")
    log.info("compared %d pairs on %d queries (one Holm family); wrote %s", len(pairs), n_queries, out)
