rule satisfiable:
    """A measure no judgment can satisfy (P(rel=5)@10 on gains 0-2) refused seconds after the data stage: every
    training waits for this check (an ancient input of rule train: new measures rerun the check and the evaluations,
    not a training), and its priority puts it before anything long."""
    input:
        qrels=DATA["qrels.txt"],
    output:
        MEASURES_CHECKED,
    log:
        f"{R}/logs/satisfiable.log",
    priority: CHECK_PRIORITY
    conda:
        CONDA_ENV
    params:
        measures=config["evaluation"]["measures"],
    shell:
        "python -m longrank satisfiable --qrels {input.qrels:q} --measures {params.measures:q} --out {output:q} 2> {log:q}"


# A system's per-query measures; a seeded model's (train.seeds) are each query's mean over its seeds' runs
rule evaluate:
    input:
        run=evaluated_runs,
        qrels=DATA["qrels.txt"],
        folds=DATA["folds.json"],
        measures_checked=MEASURES_CHECKED,
    output:
        f"{R}/eval/{{system}}.tsv",
    log:
        f"{R}/logs/evaluate_{{system}}.log",
    conda:
        CONDA_ENV
    params:
        measures=config["evaluation"]["measures"],
    shell:
        "python -m longrank evaluate --run {input.run:q} --qrels {input.qrels:q} --folds {input.folds:q}"
        " --measures {params.measures:q} --out {output:q} 2> {log:q}"


rule compare:
    input:
        expand(f"{R}/eval/{{system}}.tsv", system=SYSTEMS),
    output:
        table=report(f"{R}/compare/table.csv", caption="../report/effectiveness.rst", category="Tables"),
        pairs=report(f"{R}/compare/pairs.csv", caption="../report/pairs.rst", category="Tables"),
        markdown=f"{R}/compare/table.md",
        latex=f"{R}/compare/table.tex",
        settings=f"{R}/compare/settings.json",
    log:
        f"{R}/logs/compare.log",
    conda:
        CONDA_ENV
    params:
        systems=SYSTEMS,
        reference=lambda wc: (
            ["--reference", config["evaluation"]["noninferiority_reference"]]
            if config["evaluation"]["noninferiority_reference"]
            else []
        ),
        margins=config["evaluation"]["margins"],
        alpha=config["evaluation"]["alpha"],
        bootstrap=config["evaluation"]["bootstrap"],
        eval_dir=lambda wc, input: os.path.dirname(input[0]),
        out_dir=lambda wc, output: os.path.dirname(output.table),
    shell:
        "python -m longrank compare --eval-dir {params.eval_dir:q} --systems {params.systems:q} {params.reference:q}"
        " --margins {params.margins:q} --alpha {params.alpha:q} --bootstrap {params.bootstrap:q} --out-dir {params.out_dir:q} 2> {log:q}"


rule compare_floors:
    input:
        expand(f"{R}/eval/{{system}}.tsv", system=PLAN.floor_pair_systems),
    output:
        pairs=f"{R}/compare/floors/pairs.csv",
        settings=f"{R}/compare/floors/settings.json",
    log:
        f"{R}/logs/compare_floors.log",
    conda:
        CONDA_ENV
    params:
        systems=PLAN.floor_pair_systems,
        pairs=[f"{m}:{floor}" for m, floor in FLOOR_PAIRS],
        alpha=config["evaluation"]["alpha"],
        bootstrap=config["evaluation"]["bootstrap"],
        eval_dir=lambda wc, input: os.path.dirname(input[0]),
        out_dir=lambda wc, output: os.path.dirname(output.pairs),
    shell:
        "python -m longrank compare --eval-dir {params.eval_dir:q} --systems {params.systems:q} --pairs {params.pairs:q}"
        " --alpha {params.alpha:q} --bootstrap {params.bootstrap:q} --out-dir {params.out_dir:q} 2> {log:q}"
