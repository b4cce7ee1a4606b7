"""Train: choose methods, seeds and settings; launch in the background; watch progress."""

import streamlit as st

from studio_ui.choice import current_dataset, display_name
from studio_ui.estimates import device_kind
from studio_ui.jobs_panel import jobs_panel
from studio_ui.launch_buttons import estimate_words, finished_runs, launch_button
from studio_ui.launches import launch_form
from studio_ui.navigation import sidebar
from studio_ui.text import md

sidebar()
st.title("Train")

dataset = current_dataset()
if dataset is None:
    st.stop()
device = device_kind()
st.caption(
    f"Dataset **{md(display_name(dataset.id))}** · "
    f"{len(dataset.splits['train'])} training examples · "
    f"device **{device}**"
)

st.subheader("Jobs")
st.caption(
    "Every job of this session, each kind: training, the data reports, suggestions, PDF "
    "reports and exports; each with its bar and time left, its log, and what it made."
)
jobs_panel()

st.subheader("A new launch")
launch = launch_form(dataset)
estimate_words(launch, dataset, device)
launch_button(launch, dataset)

st.subheader("Finished runs for this dataset")
finished_runs(dataset)
