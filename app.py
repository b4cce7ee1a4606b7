"""Glee Studio. Run with ``streamlit run app.py``: this file lays out the pages."""

from pathlib import Path

import streamlit as st

from studio_ui.navigation import APP_PAGES, run_page
from studio_ui.text import draw_logged

# the favicon ships with the app: a Material icon as page icon is fetched from a font CDN, which
# an offline machine cannot reach
FAVICON = Path(__file__).resolve().parent / "assets" / "favicon.png"
with draw_logged("app"):  # a bench's aid (GLEE_DRAW_LOG): the whole script, around the page
    st.set_page_config(page_title="Glee Studio", page_icon=str(FAVICON), layout="wide")
    run_page(
        st.navigation(
            [
                st.Page(
                    f"app_pages/{file}.py",
                    title=title,
                    icon=f":material/{icon}:",
                    default=file == "0_Home",
                )
                for file, title, icon in APP_PAGES
            ]
        )
    )
