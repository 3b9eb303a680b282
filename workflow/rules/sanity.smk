rule sanity:
    """The untrained lexical reranker: each test query's top rerank_depth candidates by distinct query terms
    matched, first-stage order below (src/longrank/retrieval/sanity.py). Evaluated and compared like a model."""
    input:
        data=[DATA[name] for name in ("docs.jsonl", "queries.tsv", "folds.json")],
        candidates=f"{R}/candidates/{FIRST_STAGES[0]}.run",  # the default first stage
    output:
        f"{R}/runs/{SANITY}.run",
    log:
        f"{R}/logs/sanity.log",
    conda:
        CONDA_ENV
    params:
        rerank_depth=config["rerank_depth"],
        data=data_dir,
    shell:
        "python -m longrank sanity --data {params.data:q} --candidates {input.candidates:q}"
        " --rerank-depth {params.rerank_depth:q} --out {output:q} 2> {log:q}"
