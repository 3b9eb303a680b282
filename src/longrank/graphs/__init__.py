"""MIR's pivots and graphs (Fu et al., WSDM 2022, Sec. 3.1), built once per collection before the model sees a
document: :mod:`longrank.graphs.annotate` (stage ``annotate``) finds sentences and entities with spaCy,
:mod:`longrank.graphs.build` (stage ``graphs``) cuts each document into passages and writes its sentence, token
and passage nodes with their t2t / s2s / p2p edges, and :mod:`longrank.data.records` holds the records by
document id for the model (``models/mir.py``) to read.
"""
