"""The data's way in: the dataset sources (``sources.SOURCES``: a prefix, its loader and help),
the catalog of the paper's datasets, loading and checking a long-tailed dataset
(``datasets.load_dataset``, each source's loader in ``loaders``; its splits in ``splits``, its
templates and label words in ``verbalizers``) and encoding texts to token ids (a template with
``[MASK]`` for prompt methods). Imports only ``core``."""
