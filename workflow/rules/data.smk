rule data:
    input:
        local_collection_files,
    output:
        **DATA,
    log:
        f"{R}/logs/data.log",
    conda:
        CONDA_ENV
    resources:
        mem_mb=8000,
    params:
        dataset=as_json(config["dataset"]),
        query_formulation=as_json(config["query_formulation"]),
        splits=as_json(config["splits"]),
        out_dir=lambda wc, output: os.path.dirname(output[0]),
    shell:
        "python -m longrank data --dataset {params.dataset:q} --query-formulation {params.query_formulation:q}"
        " --splits {params.splits:q} --out-dir {params.out_dir:q} 2> {log:q}"
