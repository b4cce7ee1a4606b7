"""The Streamlit face's shared pieces, a module per job; a page imports each name from the module
that defines it (``from studio_ui.launches import launch_form``). In import order (each module
imports only those above it):

- ``text``: user strings made literal for Markdown, durations in words.
- ``access``: public mode's policy, this browser's workspace and its cookie, share links, the
  visitor as the server sees them.
- ``stores``: which run stores this session reads and writes; their runs, read once per change.
- ``choice``: the dataset and backbone chosen, remembered across pages and a reload.
- ``estimates``: what a job costs here (its kind's estimate over this session's runs and jobs).
- ``jobs``: launching every kind of job one way (public mode's limits are
  ``glee_core.serve.workspaces``'), its button and bar.
- ``jobs_panel``: the jobs panel and the sidebar's line on the work running.
- ``widgets``: the pickers the pages share.
- ``recommendation``: the answer a compare ends on, its candidates, and its next steps as one
  click each.
- ``reproduction``: the Results page's paper comparison (what ``reproduce`` wrote).
- ``results``: the Results page's own tabs: this dataset's table and charts, calibration.
- ``reports``: the Data page's health check and label budget: their jobs, then the reports.
- ``labelling``: labelling the suggested texts (a click or a key each), adding them to the data.
- ``learning``: learning from the pool (self-training as a job), and Home's comparison of a
  version with its parent.
- ``pool``: the Data page's unlabelled texts: a pool kept, what to label next, then the two above.
- ``datasets``: the Data page's own sections: the dataset picker, an upload, the long tail,
  a sample of each class.
- ``label_words``: the Data page's label words and template, checked and given anew.
- ``adapting``: the Data page's adapting of the backbone to the data (a job).
- ``navigation``: the pages, the sidebar and its workspace panel.
- ``executors``: the launch form's executor and runs at once.
- ``launches``: the Train page's launch form.
- ``launch_buttons``: the launch's estimate in words and its button, Home's quick compare, the
  dataset's finished runs.

Pages and these modules import each engine name from the module that defines it, among the
engine modules the face may use (``tests/test_layers.py``: ``APP_REACHES``).
"""
