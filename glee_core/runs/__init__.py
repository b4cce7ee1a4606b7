"""A finished run and what is read from it: its typed records (``record.RunRecord``,
``MetricsRecord``), metrics, one validating loader per stored file (``runfiles``), the run store,
the paper's reference tables and findings, result tables, post-hoc calibration and time
estimates. Below the trainer, which writes runs; imports ``core``, ``data`` and ``models``."""
