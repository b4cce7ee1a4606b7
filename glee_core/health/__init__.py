"""Data health, one feature in one package: the out-of-fold probabilities a check is read from
(``examine``: the probe or any quick-mode head, trained once a fold), the report that reads them
(``report``: suspected label errors, near-duplicates and leaks across splits, classes that
overlap, per class; written beside the data and read by the app and the PDF), and the options
of ``python -m glee_core health`` (``options``).

A vertical slice of the layers (``tests/test_layers.py``'s ``FEATURES``): ``options`` beside
``models``, ``report`` beside ``runs`` (no torch), ``examine`` beside ``train``."""
