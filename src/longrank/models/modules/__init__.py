"""Building blocks shared across papers; each paper model (one file per paper in ``longrank.models``)
imports the blocks it is made of from here:

- ``word_embedder``: GloVe word embeddings over the collection vocabulary, tokenisation, query-term options
  (KNRM, TK, TKL).
- ``kernel_pooling``: RBF kernels over cosine similarities (KNRM, TK, TKL).
- ``positions``: sinusoidal position features (TK, TKL).
- ``transformer``: a post-norm Transformer encoder layer on fused attention (TK, TKL).
- ``contextualizer``: TK's Transformer contextualiser with the raw/contextual mix (TK, TKL).
- ``encoders``: pretrained WordPiece encoders (BERT ranker, MORES, bi-encoder).
- ``mir_graph_layer``: a Transformer layer whose aggregation follows a graph's edges (MIR).
- ``node_pooling``: one vector from a masked set of node states: attention, max, CNN, Transformer (MIR).
- ``windowed_kernel_pooling``: RBF kernels summed per window of the document (NDRM).
"""
