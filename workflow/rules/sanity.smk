rule sanity:
    """The untrained lexical reranker: each test query's top rerank_depth candidates by distinct query terms
    matched, first-stage order below (src/longrank/retrieval/lexical.py). Evaluated and compared like a model."""
    input:
        docs=DATA["docs.jsonl"],
        queries=DATA["queries.tsv"],
        folds=DATA["folds.json"],
        candidates=CANDIDATES,
    output:
        f"{R}/runs/{SANITY}.run",
    params:
        rerank_depth=config["rerank_depth"],
        data=f"{R}/data",
    log:
        f"{R}/logs/sanity.log",
    conda:
        CONDA_ENV
    shell:
        "python -m longrank sanity --data {params.data} --candidates {input.candidates}"
        " --rerank-depth {params.rerank_depth} --out {output} 2> {log}"


# runs/{model}.run of rule rerank matches this file name too; the schema forbids a model of that name.
ruleorder: sanity > rerank
