"""The Streamlit face's shared pieces, a module per job; a page writes ``import studio_ui`` and
calls ``studio_ui.launch(...)``. In import order (each module imports only those above it):

- ``text``: user strings made literal for Markdown, durations in words.
- ``access``: public mode's policy, this browser's workspace and its cookie, share links, the
  visitor as the server sees them.
- ``stores``: which run stores this session reads and writes; their runs, read once per change.
- ``choice``: the dataset and backbone chosen, remembered across pages and a reload.
- ``estimates``: what a job costs here (its kind's estimate over this session's runs and jobs).
- ``jobs``: launching every kind of job one way (public mode's limits are
  ``glee_core.serve.workspaces``'), its button and bar, the jobs panel and the sidebar's line.
- ``widgets``: the pickers the pages share.
- ``recommendation``: the answer a compare ends on, its candidates, and its next steps as one
  click each.
- ``reports``: the Data page's health check and label budget: their jobs, then the reports.
- ``labelling``: the Data page's unlabelled texts: what to label next, labelling, adding.
- ``datasets``: the Data page's own sections: the dataset picker, an upload, the long tail,
  the label words, a sample of each class, adapting the backbone.
- ``navigation``: the pages, the sidebar and its workspace panel.
- ``launches``: Home's quick compare; the Train page's launch form, its estimate in words,
  the Launch button and the dataset's finished runs.

Pages reach the engine only through ``glee_core.studio`` (``tests/test_layers.py``).
"""

from .access import (
    LEGACY_WORKSPACE_PARAM,
    NOBODY,
    SHARE_PARAM,
    own_store_or_nothing,
    policy,
    remember_workspace,
    shared_workspace,
    visitor_id,
    workspace,
)
from .choice import (
    CHOICE_FILE,
    DEMO,
    STORED_ONLY,
    adapted_line,
    backbone_notice,
    choose_dataset,
    choose_prompt,
    current_choice,
    current_dataset,
    current_dataset_id,
    current_model,
    dataset_choices,
    display_name,
    incomplete_paper_datasets,
    load_options,
    set_threshold,
)
from .datasets import (
    adapt_section,
    dataset_picker,
    label_words_section,
    long_tail_view,
    rare_classes,
    sample_rows,
    upload_section,
)
from .estimates import (
    device_kind,
    estimate_of,
    here,
    label_word_heads_left_out,
    trainable_parameters,
)
from .jobs import (
    download,
    job_progress,
    job_title,
    jobs_panel,
    last_failure,
    last_made,
    launch,
    newest_job,
    rebased,
    running_step,
    sidebar_jobs,
    work_button,
)
from .labelling import added_panel, unlabelled_texts_section
from .launches import (
    Launch,
    estimate_words,
    finished_runs,
    launch_button,
    launch_form,
    quick_compare_button,
)
from .navigation import (
    APP_PAGES,
    LABEL_WORDS_BUTTON,
    label_words_button,
    run_page,
    sidebar,
    workspace_panel,
)
from .recommendation import (
    STEP_TEXTS,
    budget_notice,
    candidates_table,
    dataset_budget,
    recommendation_panel,
    variant_comparison,
    variant_runs,
)
from .reports import budget_section, health_section
from .stores import (
    all_runs,
    backbones_dir,
    cached_runs,
    dataset_runs,
    quick_compare_runs,
    recommendation_of,
    runs_by_id,
    shared_run_ids,
    shared_store,
    store,
    store_state,
    stores,
    uploads_dir,
)
from .text import (
    draw_logged,
    duration,
    md,
    model_label,
    visible,
)
from .widgets import (
    answer_labels,
    choose,
    choose_many,
    class_highlight,
    method_labels,
    pick_runs,
    run_labels,
    runs_or_stop,
    setting_inputs,
    setting_runs,
)
