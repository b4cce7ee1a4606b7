"""What people look at: the charts (``charts.RUN_CHARTS``: one registry read by the app, the PDF
and the gallery) and the PDF report. Reads runs; never trains."""
