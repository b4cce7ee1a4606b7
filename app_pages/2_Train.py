"""Train: choose methods, seeds and settings; launch in the background; watch progress."""

import streamlit as st

import studio_ui

studio_ui.sidebar()
st.title("Train")

dataset = studio_ui.current_dataset()
if dataset is None:
    st.stop()
device = studio_ui.device_kind()
st.caption(
    f"Dataset **{studio_ui.md(studio_ui.display_name(dataset.id))}** · "
    f"{len(dataset.splits['train'])} training examples · "
    f"device **{device}**"
)

st.subheader("Jobs")
st.caption(
    "Every job of this session, each kind: training, the data reports, suggestions, PDF "
    "reports and exports; each with its bar and time left, its log, and what it made."
)
studio_ui.jobs_panel()

st.subheader("A new launch")
launch = studio_ui.launch_form(dataset)
studio_ui.estimate_words(launch, dataset, device)
studio_ui.launch_button(launch, dataset)

st.subheader("Finished runs for this dataset")
studio_ui.finished_runs(dataset)
