rule pseudo_queries:
    """A set of training queries made from the documents (src/longrank/train/pseudo_queries.py), built once per
    collection: every model that pre-trains on it (train.pretrain.queries) reuses it."""
    input:
        data=[DATA[name] for name in ("docs.jsonl", "queries.tsv", "word_doc_freq.tsv")],
        index=pseudo_query_index,
    output:
        directory(f"{R}/pseudo_queries/{{pseudo_set}}"),
    log:
        f"{R}/logs/pseudo_queries_{{pseudo_set}}.log",
    benchmark:
        f"{R}/benchmarks/pseudo_queries_{{pseudo_set}}.tsv"
    priority: chain_priority("pseudo_sets")
    conda:
        CONDA_ENV
    resources:
        mem_mb=8000,
    params:
        settings=lambda wc: as_json(config["pseudo_queries"][wc.pseudo_set]),
        source=pseudo_query_source,
        data=data_dir,
    shell:
        "python -m longrank pseudo_queries --data {params.data:q} --name {wildcards.pseudo_set:q} --config {params.settings:q}"
        " {params.source:q} --out {output:q} 2> {log:q}"
