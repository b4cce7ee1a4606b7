"""Using a stored run: scoring new text (``inference.Scorer``), exporting a self-contained
classifier with a model card (``export``), the app's uploaded CSVs, and the public Space's
per-visitor workspaces. Never
imports the trainer's steps."""
