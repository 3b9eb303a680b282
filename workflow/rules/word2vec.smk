rule word2vec:
    """word2vec trained on the collection (IN and OUT vectors concatenated, the Conformer-Kernel paper's
    initialisation): built once per collection, read by every model with `embeddings: word2vec`; with it the
    processed terms' document frequencies and the keys it was built with (a model checks the processing)."""
    input:
        docs=DATA["docs.jsonl"],
        fields=word2vec_field_stores,
        queries=[DATA["queries.tsv"], DATA["folds.json"]] if config["word2vec"]["training_queries"] else [],
    output:
        vectors=WORD2VEC,
        doc_freq=f"{R}/data/word2vec_doc_freq.tsv",
        meta=f"{R}/data/word2vec.json",
    log:
        f"{R}/logs/word2vec.log",
    benchmark:
        f"{R}/benchmarks/word2vec.tsv"
    priority: TRAINING_PRIORITY
    conda:
        CONDA_ENV
    threads: 1
    params:
        dim=config["word2vec"]["dim"],
        window=config["word2vec"]["window"],
        epochs=config["word2vec"]["epochs"],
        min_count=config["word2vec"]["min_count"],
        seed=config["word2vec"]["seed"],
        architecture=config["word2vec"]["architecture"],
        processing=config["word2vec"]["processing"],
        sample=config["word2vec"]["sample"],
        alpha=config["word2vec"]["alpha"],
        doc_fields=lambda wc: (
            ["--doc-fields", as_json(config["word2vec"]["doc_fields"])] if config["word2vec"].get("doc_fields") else []
        ),
        training_queries=["--training-queries"] if config["word2vec"]["training_queries"] else [],
    shell:
        "python -m longrank word2vec --docs {input.docs:q} --dim {params.dim:q} --window {params.window:q} --epochs {params.epochs:q}"
        " --min-count {params.min_count:q} --seed {params.seed:q} --architecture {params.architecture:q}"
        " --processing {params.processing:q} --sample {params.sample:q} --alpha {params.alpha:q} {params.doc_fields:q}"
        " {params.training_queries:q} --out {output.vectors:q} 2> {log:q}"
