"""The foundation every layer stands on, knowing nothing of text or models: errors
(``GleeError``), atomic file writes, where things live (``environment``: every ``GLEE_*``
variable), progress events (and ``bars``: the command line's tqdm bars drawing them), devices
and precision, the Hugging Face hub's reachability, data-parallel set-up and the training slots
that queue runs on a machine. Imports nothing else of ``glee_core``."""
