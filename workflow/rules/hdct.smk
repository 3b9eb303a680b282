rule hdct:
    """HDCT's term-weight encoder, trained on the collection's titles or a pseudo-query set, and the BM25 index of
    its pseudo-documents (src/longrank/train/hdct.py): once per collection and first stage; no query is seen."""
    input:
        data=[DATA[name] for name in ("docs.jsonl", "queries.tsv")],
        pseudo_queries=hdct_pseudo_queries,
    output:
        directory(f"{R}/hdct/{{first_stage}}"),
    log:
        f"{R}/logs/hdct_{{first_stage}}.log",
    benchmark:
        f"{R}/benchmarks/hdct_{{first_stage}}.tsv"
    priority: chain_priority("stages")
    conda:
        CONDA_ENV
    threads: MODEL_THREADS
    resources:
        mem_mb=12000,
        gpu=lambda wc: 0 if config["device"] == "cpu" else 1,
    params:
        spec=lambda wc: as_json(config["first_stages"][wc.first_stage]),
        source=lambda wc, input: (
            ["--pseudo-queries", *input.pseudo_queries]
            if input.pseudo_queries
            else ["--dataset", as_json(config["dataset"])]
        ),
        data=data_dir,
        device=config["device"],
        deterministic=DETERMINISTIC,
    shell:
        "OMP_NUM_THREADS={threads:q} python -m longrank hdct --data {params.data:q} --first-stage {params.spec:q}"
        " {params.source:q} --device {params.device:q} {params.deterministic:q} --out {output:q} 2> {log:q}"
