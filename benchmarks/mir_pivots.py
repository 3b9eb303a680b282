"""MIR's token pivots: how many token nodes and token-graph edges each choice of pivots gives (MIR §3.1.2).

The paper's pivots are TagMe's entities and PRF-weighted words (Eq. 1). TagMe is a web service, so spaCy's named
entities stand in (docs/paper-settings.md). This builds, with the real ``graphs`` stage, three graph sets beside the
config's own ``mir`` set (entities and PRF words): entities alone, PRF words alone, and neither (passages and
sentences only), and prints a table of their token nodes and t2t / s2s edges per document.

    PYTHONPATH=src python benchmarks/mir_pivots.py <workdir> <config file> [<config file> ...]

``<workdir>`` (the current directory: the config files are read from it) is a Snakemake working directory with
``config/`` (a copy or a link), where the config's own graph set
may already be built (a finished run: its annotations are reused). IRLeD and the TREC DL rehearsal are measured in
docs/paper-settings.md.
"""

import subprocess
import sys
from pathlib import Path

import yaml

from longrank.validation.validate import validate_config
from longrank.config.files import merged
from longrank.io.json_yaml import read_json

SNAKEFILE = Path(__file__).resolve().parents[1] / "Snakefile"
VARIANTS = {
    "mir": "spaCy entities + PRF words (the config's set)",
    "pivots_entities": "spaCy entities alone",
    "pivots_prf": "PRF words alone",
    "pivots_none": "none (passages and sentences only)",
}


def overlay_of(graph_set: dict) -> dict:
    """The three other sets, each the config's ``mir`` set with one kind of pivot (or both) taken out."""
    entities = {k: v for k, v in graph_set.items() if k != "prf_queries"}
    return {
        "mir_graphs": {
            "pivots_entities": entities,
            "pivots_prf": {**graph_set, "entity_labels": []},
            "pivots_none": {**entities, "entity_labels": []},
        }
    }


def main(workdir: Path, configs: list[str]) -> None:
    config = validate_config(merged(tuple(configs)))
    overlay = workdir / "mir_pivots.yaml"
    overlay.write_text(yaml.safe_dump(overlay_of(config["mir_graphs"]["mir"])))
    results = workdir / "results" / config["dataset"]["name"]
    targets = [str(results.relative_to(workdir) / "graphs" / name) for name in VARIANTS]
    subprocess.run(
        # mtime alone: a finished run's annotations and pseudo-queries are reused as they are (the three new sets are
        # built either way)
        [sys.executable, "-m", "snakemake", "-s", str(SNAKEFILE), "--cores", "2", *targets, "--rerun-triggers", "mtime"]
        + ["--configfile", *configs, str(overlay.resolve())],
        cwd=workdir,
        check=True,
    )
    print(f"{config['dataset']['name']}: per document (mean, 90th percentile)")
    print("| token pivots | documents with a PRF word | token nodes | t2t edges | s2s edges |")
    print("|---|---|---|---|---|")
    for name, what in VARIANTS.items():
        stats = read_json(results / "graphs" / name / "stats.json")
        cells = [
            f"{stats[group][view]['mean']:.1f} ({stats[group][view]['p90']:.0f})"
            for group, view in (("nodes", "tokens"), ("edges", "t2t"), ("edges", "s2s"))
        ]
        print(f"| {what} | {stats['prf_documents']} of {stats['documents']} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
