rule sanity:
    """An untrained lexical reranker (src/longrank/retrieval/sanity.py): each test query's top candidates by distinct
    query terms matched, first-stage order below; query_term_matches over whole documents at the global depth, and
    per trained model the count over the words it reads at its own depth (FLOORS). query_term_matches is compared like
    a model; each model's own floor with its model only (rule compare_floors)."""
    input:
        data=[DATA[name] for name in ("docs.jsonl", "queries.tsv", "folds.json")],
        candidates=lambda wc: f"{R}/candidates/{FLOORS[wc.floor].first_stage}.run",
    output:
        f"{R}/runs/{{floor}}.run",
    log:
        f"{R}/logs/sanity_{{floor}}.log",
    wildcard_constraints:
        floor="|".join(map(re.escape, FLOORS)),
    conda:
        CONDA_ENV
    params:
        rerank_depth=lambda wc: FLOORS[wc.floor].depth,
        read_words=lambda wc: FLOORS[wc.floor].read_arguments(),
        data=data_dir,
    shell:
        "python -m longrank sanity --data {params.data:q} --candidates {input.candidates:q}"
        " --rerank-depth {params.rerank_depth:q} {params.read_words:q} --out {output:q} 2> {log:q}"
