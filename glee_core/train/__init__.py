"""Training: the one loop (``loop``: a trial, a pack of trials; a lone run is a pack of one), the
trainer in steps (``training.prepare`` / ``fit`` / ``evaluate``), planning and
storing runs (``experiment``), executors (here or Ray), background jobs, task-adaptive
pretraining (``adapt``) and the paper's reproductions. Imports every layer below it."""
