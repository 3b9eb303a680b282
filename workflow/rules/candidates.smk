rule candidates:
    input:
        docs=DATA["docs.jsonl"],
        queries=DATA["queries.tsv"],
    output:
        CANDIDATES,
    params:
        first_stage=as_json(config["first_stage"]),
        data=f"{R}/data",
    log:
        f"{R}/logs/candidates.log",
    benchmark:
        f"{R}/benchmarks/candidates.tsv"
    resources:
        mem_mb=8000,
    conda:
        CONDA_ENV
    shell:
        "python -m longrank candidates --data {params.data} --first-stage {params.first_stage:q} --out {output} 2> {log}"
