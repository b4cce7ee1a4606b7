"""Results: the paper-style table, per-class F1 against frequency, head vs tail; and the paper
comparison that ``python -m glee_core reproduce`` wrote."""

import streamlit as st

from studio_ui.navigation import sidebar
from studio_ui.reproduction import paper_tab
from studio_ui.results import calibration_tab, dataset_tab

sidebar()
st.title("Results")
ours, paper, calibration = st.tabs(
    ["This dataset", "Paper comparison (reproduce)", "Calibrate (post-hoc)"]
)
with paper:  # drawn first: the first tab stops the page when the dataset has no runs
    paper_tab()
with calibration:
    calibration_tab()
with ours:
    dataset_tab()
