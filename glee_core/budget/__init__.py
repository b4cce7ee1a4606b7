"""The label budget, one feature in one package: per-class learning curves measured in quick
mode on nested fractions of every class's training texts (``curves``), the forecast they give
of the texts each class needs to reach a target F1, stored and read (``report``), and the
options of ``python -m glee_core budget`` (``options``).

A vertical slice of the layers (``tests/test_layers.py``'s ``FEATURES``): ``options`` beside
``models``, ``report`` beside ``runs`` (no torch), ``curves`` beside ``train``."""
