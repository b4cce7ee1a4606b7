"""The unlabelled pool, one feature in one package: reading the user's unlabelled texts and the
answers added from them (``files``), the query strategies, each a class with its ``select``
(``strategies``), the texts to label next (``suggest``), the labelling session the app keeps
(``labelling``), the pseudo-label rule and self-training on the rest (``pseudo``,
``selftrain``), and the options of ``suggest`` and ``train --pool`` (``options``).

A feature package is a vertical slice: each of its modules sits in one of the engine's layers
(``tests/test_layers.py``'s ``FEATURES``: ``files`` beside ``data``, ``strategies`` and
``options`` beside ``models``, ``pseudo`` and ``labelling`` beside ``runs``, ``suggest`` and
``selftrain`` beside ``train``) and imports only from its layer and below; torch is imported
inside the functions that train."""
