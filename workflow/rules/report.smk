from longrank.resolved_config import CONFIG_JSON_SHAPE

from longrank.report.manifest import COMPARE_FILES as REPORT_COMPARE_FILES
from longrank.report.manifest import DATA_FILES as REPORT_DATA_FILES
from longrank.report.manifest import Manifest


rule resolved_config:
    output:
        f"{R}/config.json",
    log:
        f"{R}/logs/resolved_config.log",
    conda:
        CONDA_ENV
    params:
        config=as_json(config),
        # what the stage adds to the config (resolved_models): a new shape reruns it, not only a changed config
        shape=CONFIG_JSON_SHAPE,
    shell:
        "python -m longrank resolved_config --json {params.config:q} --out {output:q} 2> {log:q}"


# The files the report reads, and nothing else: the same object gives the rule its inputs and the report its
# --manifest (src/longrank/report/manifest.py), so outputs of a model an earlier config had never reach it.
REPORT_MANIFEST = Manifest(
    config=f"{R}/config.json",
    data={name: DATA[name] for name in REPORT_DATA_FILES},
    compare={name: str(getattr(rules.compare.output, name)) for name in REPORT_COMPARE_FILES},
    runs={s: PLAN.run_file(s) for s in SYSTEMS},
    evals={s: f"{R}/eval/{s}.tsv" for s in SYSTEMS},
    candidates={s: f"{R}/candidates/{s}.run" for s in FIRST_STAGES},
    candidate_stats={s: f"{R}/candidates/{s}.stats.json" for s in FIRST_STAGES},
    interpolations={s: f"{R}/runs/{s}.interpolation.json" for s in SYSTEMS if "+" in s},
    details={m: f"{R}/runs/{m}.details.jsonl" for m in MODELS},
    read_floors={m: PLAN.run_file(floor) for m, floor in MODEL_FLOORS.items()},
    floor_pairs=str(rules.compare_floors.output.pairs) if FLOOR_PAIRS else None,
    benches=[f"{R}/bench/{m}.json" for m in BENCHED] + MORES_SPEED + MIR_SPEED,
    attention_scaling=next(iter(ATTENTION_SCALING), None),
    training={m: [f"{R}/models/{m}/fold{fold}/train_summary.json" for fold in FOLDS] for m in PLAN.trained},
    pretraining={m: f"{R}/models/{m}/pretrained/train_summary.json" for m in PLAN.pretrained},
    pseudo_queries={pseudo_queries_of(m): f"{R}/pseudo_queries/{pseudo_queries_of(m)}" for m in PLAN.pretrained},
    history={m: f"{R}/history/{m}/latest.json" for m in MODELS},
    seed_evals={
        s: {str(seed): f"{R}/eval/{per_seed}.tsv" for seed, per_seed in PLAN.seed_systems(s).items()}
        for s in SYSTEMS
        if PLAN.seed_systems(s)
    },
)


# The user's target (`snakemake report`) is the rule that builds the report: named as its stage, like every rule.
rule report:
    input:
        REPORT_MANIFEST.files(),
    output:
        html=report(REPORT, caption="../report/report.rst", category="Report"),
        markdown=f"{R}/report/report.md",
        # Figures exist only when their inputs do (no TKL run, no region plot): a folder of them, shown
        # by `snakemake --report` with one caption each.
        figures=report(
            directory(f"{R}/report/figures"),
            patterns=["{name}.png"],
            caption="../report/figures.rst",
            category="Figures",
            labels={"figure": "{name}"},
        ),
    log:
        f"{R}/logs/report.log",
    conda:
        CONDA_ENV
    params:
        manifest=REPORT_MANIFEST.to_json(),
        # the report's code (longrank.results.code_digest): a changed table or verdict rebuilds it
        code=code_of("report"),
        out_dir=lambda wc, output: os.path.dirname(output.html),
    shell:
        "python -m longrank report --manifest {params.manifest:q} --out-dir {params.out_dir:q} 2> {log:q}"
