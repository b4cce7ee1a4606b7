"""The answer a compare ends on and its next steps, one click each, with their estimates."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from glee_core.core.errors import GleeError
from glee_core.views.results_charts import candidates_frame

from .access import policy
from .choice import current_choice, current_dataset_id, load_options
from .estimates import estimate_of
from .jobs import download, last_failure, last_made, launch_here, running_step, work_button
from .stores import all_runs, kept_pools, recommendation_of, shared_run_ids, store, stores
from .text import md

STEP_TEXTS = {  # a recommendation's next step: its button, and why
    "finetune-one": (
        "Fine-tune {heads}",
        "fine-tuning is where the accuracy is (practical recipe: learning rate "
        "chosen on dev, LP-FT from this very head)",
    ),
    "finetune": (
        "Fine-tune the best of the top {n}: {heads}",
        "the best head fine-tuned may not be the best quick one: the {n} race at one "
        "learning rate (chosen once on dev), each round the better half on dev goes on, "
        "and only the last one trains to the end - about half the time of {n} "
        "fine-tunes",
    ),
    "seeds": (
        "Run seeds 1-{seeds} for the top {n}: {heads}",
        "{seeds} seeds give the spread that says which gaps are noise",
    ),
}


def variant_runs(dataset_id: str) -> dict[str, list]:
    """The runs of this dataset and of its variants (the data health's "train without the
    flagged rows", ``+without-N-...``; self-training's ``+pseudo-N-...``), by dataset id, the
    full data's first; {} without a variant with runs."""
    from glee_core.data.splits import WITHOUT  # noqa: PLC0415
    from glee_core.pool.files import PSEUDO  # noqa: PLC0415
    from glee_core.runs.variants import variant_base  # noqa: PLC0415

    base_id = variant_base(dataset_id)
    by_id: dict[str, list] = {}
    for run in all_runs(report=False):
        if run.dataset == base_id or any(
            run.dataset.startswith(base_id + ending) for ending in (WITHOUT, PSEUDO)
        ):
            by_id.setdefault(run.dataset, []).append(run)
    if set(by_id) <= {base_id}:
        return {}
    return {key: by_id[key] for key in sorted(by_id, key=lambda k: (k != base_id, k))}


def variant_comparison(dataset_id: str) -> str | None:
    """Where the data health's "train without the flagged rows" made a variant of this dataset
    (or this is one): whether it wins on dev, a sentence for each variant with runs."""
    from glee_core.runs.variants import variant_base, variant_line  # noqa: PLC0415

    base_id = variant_base(dataset_id)
    by_id = variant_runs(dataset_id)
    if not by_id:
        return None
    base = recommendation_of(by_id.get(base_id, []))
    lines = [
        variant_line(base_id, base, v, recommendation_of(runs))
        for v, runs in by_id.items()
        if v != base_id
    ]
    return " ".join(line for line in lines if line) or None


def dataset_budget(dataset_id: str):
    """The newest label budget the Data page measured for this dataset (any backbone), from
    the stores this session reads (a ``BudgetReport``); None when there is none."""
    found = [
        latest
        for runs_store in stores()
        if (latest := runs_store.latest_budget(dataset_id)) is not None
    ]
    return max(found, key=lambda item: item[0])[2] if found else None


def budget_notice(dataset_id: str) -> None:
    """The label budget's sentence (the tail classes one more text helps most), where the Data
    page measured one for this dataset."""
    from glee_core.budget.report import budget_line  # noqa: PLC0415

    if (budget := dataset_budget(dataset_id)) and (line := budget_line(budget, md)):
        st.info(line, icon=":material/playlist_add:")


def self_trained_winner(rec):
    """Where self-training's pseudo-labels made a variant of this dataset whose recommended
    candidate beats the data's own on dev beyond the seeds' spread (``dev_winner``): (its
    runs, its recommendation, the pool to relaunch it with: the newest kept one); else None."""
    from glee_core.pool.files import PSEUDO  # noqa: PLC0415
    from glee_core.pool.options import SelfTrainOptions  # noqa: PLC0415
    from glee_core.runs.variants import dev_winner  # noqa: PLC0415

    dataset_id = current_dataset_id()
    if PSEUDO in dataset_id:
        return None
    variants = {
        v: found
        for v, found in variant_runs(dataset_id).items()
        if v.startswith(dataset_id + PSEUDO)
    }
    recs = {v: recommendation_of(found) for v, found in variants.items()}
    winner = dev_winner(rec, recs)
    if not winner:
        return None
    pools = kept_pools()
    options = SelfTrainOptions(pool=str(pools[0]), self_train="yes") if pools else None
    return variants[winner], recs[winner], options


def recommendation_panel(runs, key: str) -> None:
    """The answer a compare ends on (``glee_core.runs.recommend``): the head to use among this
    dataset's ``runs``, chosen on dev, its test scores over seeds, the heads within noise, and
    each next step as one click (fine-tuning the top heads, more seeds). Where self-training's
    pseudo-labels made a variant whose candidate wins on dev, that candidate is the answer and
    its steps train with the pool (:func:`self_trained_winner`)."""
    from glee_core.runs.notes import unreadable_note  # noqa: PLC0415
    from glee_core.runs.recommend import ENOUGH_SEEDS, order_steps  # noqa: PLC0415
    from glee_core.runs.recommend_text import recommendation_text  # noqa: PLC0415
    from glee_core.train.next_steps import with_requests  # noqa: PLC0415

    rec = recommendation_of(runs)
    if rec is None:
        return
    pseudo = self_trained_winner(rec) if key == "home" else None
    if pseudo is not None:
        runs, rec, pseudo_options = pseudo
        st.success(
            "**With self-training** (the pool's pseudo-labels in the training texts, "
            f"`{runs[0].dataset}`): " + recommendation_text(rec, literal=md),
            icon=":material/recommend:",
        )
    else:
        st.success(recommendation_text(rec, literal=md), icon=":material/recommend:")
    if rec.ensemble is not None and pseudo is None:
        ensemble_export(rec.ensemble, key)
    if note := unreadable_note([run.record for run in runs]):  # the backbone cannot read it
        st.warning(md(note), icon=":material/translate:")
    if line := variant_comparison(current_dataset_id()):
        st.info(line)
    budget_notice(current_dataset_id())
    if not rec.steps:
        st.caption(
            f"It is fine-tuned and has {ENOUGH_SEEDS} or more seeds: export it "
            "(`python -m glee_core export`), or compare another mode on the Train page."
        )
        return
    choice = current_choice()
    try:  # the runs may outlive their data (a deleted upload): then the steps are only named
        dataset = load_options(choice)
    except GleeError:
        dataset = None
    rec = with_requests(rec, runs, choice, dataset)
    if pseudo is not None:  # its steps relaunch self-training with the pool (None: named only)
        rec = replace(
            rec,
            steps=tuple(
                replace(
                    s,
                    request=replace(s.request, self_train=pseudo_options)
                    if s.request is not None and pseudo_options is not None
                    else None,
                )
                for s in rec.steps
            ),
        )
    estimates = {
        step.kind: estimate_of(step.request, dataset)
        for step in rec.steps
        if step.request is not None and dataset is not None
    }
    steps = order_steps(rec.steps, {kind: e.seconds / 60 for kind, e in estimates.items()})
    if steps:
        st.markdown("**Next steps**, best value for the time first:")
    for number, step in enumerate(steps):
        _next_step(step, estimates.get(step.kind), key, primary=number == 0)


def _next_step(step, estimate, key: str, primary: bool) -> None:
    """One next step: its button with its estimate (its bar while it runs), and why; where it
    cannot launch here (no request, a read-only deployment, no estimate), named only."""
    from glee_core.runs.recommend import ENOUGH_SEEDS  # noqa: PLC0415

    heads = step.heads
    button, why = STEP_TEXTS[step.kind]
    label = button.format(n=len(heads), heads=", ".join(heads), seeds=ENOUGH_SEEDS)
    why = why.format(seeds=ENOUGH_SEEDS, n=len(heads))
    if passed := step.passed_over:
        ranks = "ranks" if len(passed) == 1 else "rank"
        best = (
            f"`{heads[0]}` is the best candidate that can"
            if len(heads) == 1
            else f"these are the best {len(heads)} that can"
        )
        why = (
            ", ".join(f"`{m}`" for m in passed) + f" {ranks} higher but "
            f"{'is' if len(passed) == 1 else 'are'} fitted on the frozen features and "
            f"cannot be fine-tuned; {best}. {why[0].upper()}{why[1:]}"
        )
    request = step.request
    if request is None or policy().read_only or estimate is None:
        st.caption(
            f"Next: {label[0].lower() + label[1:]} ({why}); on the Train page or "
            "with `python -m glee_core train`."
        )
        return
    label = f"{label} ({estimate.text.removeprefix('about ')})"
    if running_step(request, key=f"{key}-{step.kind}-running"):
        return
    slot = st.empty()
    if slot.button(label, type="primary" if primary else "secondary", key=f"{key}-{step.kind}"):
        launch_here(slot, request, label, estimate)
    st.caption(f"Why: {why}. Estimated here: {estimate.text} ({estimate.basis}; {estimate.sure}).")


def ensemble_export(ensemble, key: str) -> None:
    """The averaged answer as one folder to take away (an export job: each member the studio's
    classifier folder, ``load_classifier`` reads the whole), and where each member is explained."""
    from glee_core.models.requests import ExportRequest  # noqa: PLC0415

    seed = ensemble.runs[0].seed
    st.caption(
        f"The Predictions page shows the average's test predictions; each member is a run of "
        f"its own (seed {seed}), which the Diagnostics page explains. Only the studio's folder "
        "carries the average (ONNX, transformers and peft hold one classifier)."
    )
    if set(ensemble.run_ids) & shared_run_ids():  # another visitor's runs: their models stay theirs
        return
    name = f"{ensemble.run_ids[0]}-average-of-{len(ensemble.runs)}"
    request = ExportRequest(
        run=",".join(ensemble.run_ids),
        form="glee",
        out=str(store().jobs_dir / f"{name}.zip"),
        stores=[str(s.root) for s in stores()],
    )
    work_button(request, "Build the averaged classifier's folder", key=f"{key}-ensemble")
    if error := last_failure("export", request):
        st.error(f"The export failed: {md(error)}")
    elif (made := last_made("export", request)) is not None:
        for path, file, mime in made.files:
            download(path, file, mime, key=f"{key}-ensemble-zip", primary=True)


def candidates_table(compared) -> None:
    """The quick compare's candidates (``compared``, its stored runs), best first as the choice
    ranks them (cross-validation or dev, never test), in an expander."""
    shown = candidates_frame(compared)
    by_cv = any(r.metrics.cv for r in compared)
    with st.expander(f"The quick compare's candidates, best first ({len(shown)})"):
        st.dataframe(
            shown,
            hide_index=True,
            width="stretch",  # every column within 1440 px
            column_config={
                "Method": st.column_config.TextColumn(width="medium"),
                **{
                    c: st.column_config.NumberColumn(format="%.1f")
                    for c in shown.columns
                    if c.endswith("%)")
                },
            },
        )
        st.caption(
            "Ranked by "
            + ("cross-validation on train + dev" if by_cv else "dev")
            + ", never by test. The Results page has every setting side by side."
        )
