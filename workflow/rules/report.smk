rule resolved_config:
    output:
        f"{R}/config.json",
    log:
        f"{R}/logs/resolved_config.log",
    conda:
        CONDA_ENV
    params:
        config=as_json(config),
    shell:
        "python -m longrank config --json {params.config:q} --out {output} 2> {log}"


rule build_report:
    input:
        rules.compare.output,
        expand(f"{R}/bench/{{model}}.json", model=BENCHED),
        MORES_SPEED,
        MIR_SPEED,
        ATTENTION_SCALING,
        [f"{R}/runs/{s}.interpolation.json" for s in SYSTEMS if "+" in s],
        expand(f"{R}/runs/{{model}}.details.jsonl", model=MODELS),
        # training summaries (and the training_log.tsv beside each) for the report's training section
        expand(
            f"{R}/models/{{model}}/fold{{fold}}/train_summary.json",
            model=[m for m in MODELS if weights_of(m) == m],
            fold=FOLDS,
        ),
        [f"{R}/models/{m}/pretrained/train_summary.json" for m in MODELS if weights_of(m) == m and pseudo_queries_of(m)],
        expand(f"{R}/eval/{{system}}.tsv", system=SYSTEMS),
        config=f"{R}/config.json",
        stats=DATA["stats.json"],
        # the sanity and diagnostics sections read the candidates' texts, lengths and the queries
        texts=[DATA[name] for name in ("docs.jsonl", "queries.tsv", "doc_lengths.tsv")],
        candidates=expand(f"{R}/candidates/{{first_stage}}.run", first_stage=FIRST_STAGES),
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
        results=lambda wc, input: os.path.dirname(input.config),
        out_dir=lambda wc, output: os.path.dirname(output.html),
    shell:
        "python -m longrank report --results {params.results} --out-dir {params.out_dir} 2> {log}"


rule report:
    input:
        REPORT,
