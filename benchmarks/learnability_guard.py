"""The learnability guard: run it after any change to training, a model or its recipe.

    python benchmarks/learnability_guard.py --workdir /tmp/guard
    python benchmarks/learnability_guard.py --workdir /tmp/guard \\
        --configfile config/studies/learnability-guard-ndrm3-before-fix.yaml      # must FAIL: NDRM3's old recipe

It writes the learnability study's collection (tests/collections/msmarco-mini/make.py --learnability, 3,000 training
queries) into ``<workdir>/ir_datasets`` once, runs the workflow on it through ``config/studies/learnability.yaml`` and
``config/studies/learnability-guard.yaml`` (KNRM, NDRM3 on GloVe, BERT FirstP) up to the compare stage, and prints
one verdict line per family: PASS when the model's nDCG@10 on the 100 test queries is above BM25's by at least
``--margin`` and the paired two-sided Wilcoxon test against BM25 gives p < ``--alpha`` (one planned comparison per
family: uncorrected), else FAIL. It exits 1 on any FAIL. On that collection every model that learns beats BM25
(docs/studies/learnability.md): a FAIL is a fault in the pipeline or the recipe until shown otherwise. A second run in
the same working directory reruns only what its config changed (an extra ``--configfile`` retrains one model).
About 15 minutes on two cores (the trainings: KNRM 26 s, NDRM3 ~6 min, FirstP ~12 min of one core each).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from longrank.report.verdicts import pair_row

REPO = Path(__file__).resolve().parents[1]
CONFIGS = ["config/studies/learnability.yaml", "config/studies/learnability-guard.yaml"]
FAMILIES = {"knrm": "a word model", "ndrm3_glove": "NDRM3 (Conformer-Kernel)", "bert_firstp": "an encoder"}
MEASURE, FIRST_STAGE = "nDCG@10", "bm25"
TRAIN_QUERIES = 3000  # the study's largest size, where every family learned (docs/studies/learnability.md)


def verdicts(pairs: pd.DataFrame, table: pd.DataFrame, margin: float, alpha: float) -> list[tuple[str, bool, str]]:
    """(model, passed, line) per family, from the compare stage's pairs.csv and table.csv."""
    means = table[table.measure == MEASURE].set_index("system")["mean"]
    out = []
    for model, family in FAMILIES.items():
        found = pair_row(pairs, MEASURE, model, FIRST_STAGE)
        if found is None:
            out.append((model, False, f"FAIL {model} ({family}): not in the comparison"))
            continue
        diff, _, p_raw = found
        passed = diff >= margin and p_raw < alpha
        out.append(
            (
                model,
                passed,
                f"{'PASS' if passed else 'FAIL'} {model} ({family}): {MEASURE} {means[model]:.4f} vs BM25 "
                f"{means[FIRST_STAGE]:.4f} ({diff:+.4f}, Wilcoxon p {p_raw:.2g}; needs >= {margin:+.2f} and p < {alpha})",
            )
        )
    return out


def prepare(workdir: Path) -> dict[str, str]:
    """The working directory (config/ linked) and its collection, written once; the environment to run in."""
    workdir.mkdir(parents=True, exist_ok=True)
    if not (workdir / "config").exists():
        (workdir / "config").symlink_to(REPO / "config")
    home = workdir / "ir_datasets"
    if not (home / "msmarco-document" / "collection.tsv.gz").exists():
        make = REPO / "tests" / "collections" / "msmarco-mini" / "make.py"
        sizes = ["--train-pool", str(TRAIN_QUERIES), "--judged-queries", "100", "--train-queries", str(TRAIN_QUERIES)]
        subprocess.run([sys.executable, str(make), str(home), "--learnability", *sizes], check=True)
    return {**os.environ, "IR_DATASETS_HOME": str(home), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True, help="where the collection and the run go")
    parser.add_argument(
        "--configfile", nargs="*", default=[], help="overlays after the guard's (e.g. a changed recipe)"
    )
    parser.add_argument("--margin", type=float, default=0.02, help="nDCG@10 above BM25 a family must reach")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args(argv)
    env = prepare(args.workdir)
    compare = args.workdir / "results" / "learnability" / "compare"
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--cores", str(args.cores),
               str(compare.relative_to(args.workdir) / "pairs.csv"), "--configfile", *CONFIGS,
               *args.configfile]  # fmt: skip
    subprocess.run(command, cwd=args.workdir, env=env, check=True)
    lines = verdicts(pd.read_csv(compare / "pairs.csv"), pd.read_csv(compare / "table.csv"), args.margin, args.alpha)
    for _, _, line in lines:
        print(line)
    return 0 if all(passed for _, passed, _ in lines) else 1


if __name__ == "__main__":
    sys.exit(main())
