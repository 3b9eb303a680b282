"""MIR's pivots and graphs (Fu et al., WSDM 2022, Sec. 3.1), built once per collection before the model sees a
document: :mod:`longrank.mir_graphs.annotate` (stage ``annotate``) finds sentences and entities with spaCy,
:mod:`longrank.mir_graphs.graphs` (stage ``graphs``) writes one record per document, which
:mod:`longrank.mir_graphs.record` cuts into passages with its sentence, token and passage nodes and their
t2t / s2s / p2p edges, and :mod:`longrank.data.records` holds the records by
document id for the model (``models/mir.py``) to read. A graph set's settings are
:mod:`longrank.data.mir_graph_settings`'s, below this package and the models alike: the graphs stage loads the
encoder's tokenizer from ``models/`` and MIR reads the settings, with no cycle between the two packages.
"""
