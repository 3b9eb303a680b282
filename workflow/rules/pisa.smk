from longrank.retrieval.pisa_index import index_settings_of


rule pisa_index:
    """PISA's BM25 index for a first stage of method pisa (src/longrank/retrieval/pisa_index.py), streamed from docs.jsonl:
    built once per pisa first stage and rebuilt when its index settings change (stemmer, k1, b: the parameter below, so that a change to top_k or
    the query stop words reuses it), into a temporary directory renamed into place when complete."""
    input:
        data=[DATA["docs.jsonl"]],
    output:
        directory(f"{R}/pisa/{{first_stage}}"),
    log:
        f"{R}/logs/pisa_index_{{first_stage}}.log",
    benchmark:
        f"{R}/benchmarks/pisa_index_{{first_stage}}.tsv"
    priority: chain_priority("indexes")
    conda:
        CONDA_ENV
    threads: 2
    resources:
        mem_mb=8000,
    params:
        index_settings=lambda wc: as_json(index_settings_of(config["first_stages"][wc.first_stage])),
        data=data_dir,
    shell:
        "python -m longrank pisa_index --data {params.data:q} --settings {params.index_settings:q} --threads {threads:q}"
        " --out {output:q} > {log:q} 2>&1"
