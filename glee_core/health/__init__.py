"""Data health, one feature in one package: the out-of-fold probabilities a check is read from
(``examine``: the probe or any quick-mode head, trained once a fold), each kind of issue found
by a function of its own (``issues``: suspected label errors, near-duplicates and leaks across
splits, outliers, classes that overlap), the report that runs them and is written beside the data
and read by the app and the PDF (``report``), and the options of ``python -m glee_core health``
(``options``).

A vertical slice of the layers (``tests/test_layers.py``'s ``FEATURES``): ``options`` beside
``models``, ``issues`` and ``report`` beside ``runs`` (no torch), ``examine`` beside ``train``."""
