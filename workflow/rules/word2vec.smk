rule word2vec:
    """word2vec trained on the collection (IN and OUT vectors concatenated, the Conformer-Kernel paper's
    initialisation): built once per collection, read by every model with `embeddings: word2vec`."""
    input:
        docs=DATA["docs.jsonl"],
    output:
        WORD2VEC,
    log:
        f"{R}/logs/word2vec.log",
    benchmark:
        f"{R}/benchmarks/word2vec.tsv"
    conda:
        CONDA_ENV
    threads: 1
    params:
        dim=config["word2vec"]["dim"],
        window=config["word2vec"]["window"],
        epochs=config["word2vec"]["epochs"],
        min_count=config["word2vec"]["min_count"],
        seed=config["word2vec"]["seed"],
    shell:
        "python -m longrank word2vec --docs {input.docs:q} --dim {params.dim:q} --window {params.window:q} --epochs {params.epochs:q}"
        " --min-count {params.min_count:q} --seed {params.seed:q} --out {output:q} 2> {log:q}"
