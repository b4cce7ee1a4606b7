"""Training: the trainer in steps (``training.prepare`` / ``fit`` / ``evaluate``), planning and
storing runs (``experiment``), executors (here or Ray), background jobs, task-adaptive
pretraining (``adapt``) and the paper's reproductions. Imports every layer below it."""
