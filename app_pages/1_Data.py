"""Data: choose or upload a dataset; its long tail, splits and a sample of each class; its
health, label budget and unlabelled texts (each a job); adapting the backbone to it."""

import streamlit as st

import studio_ui

studio_ui.sidebar()
st.title("Data")

studio_ui.dataset_picker()
studio_ui.upload_section()
dataset = studio_ui.current_dataset()
if dataset is None:
    st.stop()
studio_ui.rare_classes(dataset)
studio_ui.long_tail_view(dataset)
studio_ui.label_words_section(dataset)
studio_ui.sample_rows(dataset)
studio_ui.health_section(dataset)
studio_ui.budget_section(dataset)
studio_ui.unlabelled_texts_section(dataset)
studio_ui.adapt_section(dataset)
