"""What people look at: the charts (``charts``: every chart's name and ``RUN_CHARTS``, one
registry read by the app, the PDF and the gallery; the charts themselves by page in
``data_charts``, ``results_charts``, ``diagnostics_charts`` + ``norm_charts`` and
``prediction_charts``, their
shared look in ``style``) and the PDF report. Reads runs; never trains."""
