"""Glee Studio. Run with ``streamlit run app.py``: this file lays out the pages."""

import streamlit as st

st.set_page_config(page_title="Glee Studio", page_icon=":material/insights:", layout="wide")
PAGES = [("0_Home", "Home", "home"), ("1_Data", "Data", "bar_chart"),
         ("2_Train", "Train", "model_training"), ("3_Results", "Results", "table_chart"),
         ("4_Diagnostics", "Diagnostics", "troubleshoot"),
         ("5_Predictions", "Predictions", "search"), ("6_Playground", "Playground", "edit_note"),
         ("7_Report", "Report", "picture_as_pdf"), ("8_Paper", "Paper", "menu_book")]
st.navigation([st.Page(f"pages/{file}.py", title=title, icon=f":material/{icon}:",
                       default=file == "0_Home")
               for file, title, icon in PAGES]).run()
