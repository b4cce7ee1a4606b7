"""Data: choose or upload a dataset; its long tail, splits and a sample of each class; its
health, label budget and unlabelled texts (each a job); adapting the backbone to it."""

import streamlit as st

from studio_ui.adapting import adapt_section
from studio_ui.choice import current_dataset
from studio_ui.datasets import (
    dataset_picker,
    long_tail_view,
    rare_classes,
    sample_rows,
    upload_section,
)
from studio_ui.label_words import label_words_section
from studio_ui.navigation import sidebar
from studio_ui.pool import unlabelled_texts_section
from studio_ui.reports import budget_section, health_section

sidebar()
st.title("Data")

dataset_picker()
upload_section()
dataset = current_dataset()
if dataset is None:
    st.stop()
rare_classes(dataset)
long_tail_view(dataset)
label_words_section(dataset)
sample_rows(dataset)
health_section(dataset)
budget_section(dataset)
unlabelled_texts_section(dataset)
adapt_section(dataset)
