"""Glee Studio. Run with ``streamlit run app.py``: this file lays out the pages."""

from pathlib import Path

import streamlit as st

# the favicon ships with the app: a Material icon as page icon is fetched from a font CDN, which
# an offline machine cannot reach
FAVICON = Path(__file__).resolve().parent / "assets" / "favicon.png"
st.set_page_config(page_title="Glee Studio", page_icon=str(FAVICON), layout="wide")
PAGES = [("0_Home", "Home", "home"), ("1_Data", "Data", "bar_chart"),
         ("2_Train", "Train", "model_training"), ("3_Results", "Results", "table_chart"),
         ("4_Diagnostics", "Diagnostics", "troubleshoot"),
         ("5_Predictions", "Predictions", "search"), ("6_Playground", "Playground", "edit_note"),
         ("7_Report", "Report", "picture_as_pdf"), ("8_Paper", "Paper", "menu_book")]
st.navigation([st.Page(f"pages/{file}.py", title=title, icon=f":material/{icon}:",
                       default=file == "0_Home")
               for file, title, icon in PAGES]).run()
