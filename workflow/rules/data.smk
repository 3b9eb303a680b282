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


rule doc_field:
    """One document field a model's `doc_fields` names beyond `dataset.doc_fields` (NDRM's URL), as a document store
    of its own beside the prepared data (src/longrank/data/doc_field.py); only jobs of such a model read it, so a config
    whose models read the collection's text alone never runs it."""
    input:
        # after the data stage, which replaces results/<name>/data whole: a store written before it (or before it
        # runs again) would be deleted with the folder while Snakemake counts it as made
        prepared=DATA["stats.json"],
    output:
        docs=f"{R}/data/fields/{{field}}/docs.jsonl",
        meta=f"{R}/data/fields/{{field}}/field.json",
    log:
        f"{R}/logs/doc_field_{{field}}.log",
    priority: TRAINING_PRIORITY
    conda:
        CONDA_ENV
    resources:
        mem_mb=4000,
    params:
        dataset=as_json(config["dataset"]),
        readers=doc_field_readers,
        out_dir=lambda wc, output: os.path.dirname(output.docs),
    shell:
        "python -m longrank doc_field --dataset {params.dataset:q} --field {wildcards.field:q}"
        " --readers {params.readers:q} --out-dir {params.out_dir:q} 2> {log:q}"
