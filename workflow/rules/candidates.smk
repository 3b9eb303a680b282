rule candidates:
    """One first stage's candidates for every query (src/longrank/retrieval/candidates.py): bm25, the
    collection's scoreddocs, or a run file the user brings."""
    input:
        data=[DATA[name] for name in ("docs.jsonl", "queries.tsv", "excluded.tsv")],
        run_file=brought_run_file,
        artifacts=stage_artifacts,
    output:
        run=f"{R}/candidates/{{first_stage}}.run",
        stats=f"{R}/candidates/{{first_stage}}.stats.json",
    log:
        f"{R}/logs/candidates_{{first_stage}}.log",
    benchmark:
        f"{R}/benchmarks/candidates_{{first_stage}}.tsv"
    priority: chain_priority("stages")
    conda:
        CONDA_ENV
    resources:
        mem_mb=8000,
    params:
        spec=first_stage_spec,
        dataset=as_json(config["dataset"]),
        data=data_dir,
        artifacts=lambda wc, input: ["--artifacts", *input.artifacts] if input.artifacts else [],
    shell:
        "python -m longrank candidates --data {params.data:q} --first-stage {params.spec:q} --dataset {params.dataset:q}"
        " {params.artifacts:q} --out {output.run:q} 2> {log:q}"
