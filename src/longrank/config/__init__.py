"""What a config can say, read the same way everywhere: the schema and the defaults it states, the config files and
their overlays, the model types' table (generated defaults included), what a model entry says about its jobs, and the
names that become paths. Torch-free and below every stage: the workflow's parse, the stages and the report read it;
checking a whole config against the data, the first stages and the measures is :mod:`longrank.validation`'s."""
