"""The command line's progress: every progress event (``events``) drawn as tqdm bars on
stderr, one bar a pass (a feature pass, a trial's epochs, a cross-validation, a data report's
steps), the dataset's warnings and a run's announcement printed once work really starts."""

from __future__ import annotations

import sys

from tqdm import tqdm

from .events import (
    CrossValidating,
    Evaluated,
    Event,
    Examining,
    FeaturePass,
    Loading,
    Note,
    Queued,
    RunStarted,
    Searching,
    Testing,
    TrainStep,
    WaitingForRun,
)
from .progress import ProgressState


class TqdmProgress:
    """Draws the progress state (:class:`ProgressState`) as one tqdm bar per pass on stderr.

    The line announcing a run and the dataset's warnings are printed once work really starts, so
    a set-up error (say, a label word outside the vocabulary) stays a single ``error:`` line."""

    def __init__(self, warnings: list[str] | None = None):
        self.state = ProgressState()
        self.bar = None
        self.pending = [f"warning: {w}" for w in warnings or []]

    def _flush(self):
        for line in self.pending:
            tqdm.write(line, file=sys.stderr)
        self.pending = []

    def _open(self, total: int, **kwargs):
        if self.bar is None:
            self.bar = tqdm(
                total=total, file=sys.stderr, dynamic_ncols=True, mininterval=1.0, **kwargs
            )
        return self.bar

    def __call__(self, event: Event) -> None:
        state = self.state.apply(event)
        if isinstance(event, RunStarted):
            self.close()
            what = "stored, loading" if state.cached else "training"
            if state.together > 1:
                self.pending.append(
                    f"[{state.run}-{state.run + state.together - 1}/"
                    f"{state.runs}] {state.together} heads on the cached "
                    "features, trained together"
                )
            else:
                self.pending.append(
                    f"[{state.run}/{state.runs}] {state.method} seed "
                    f"{state.seed}: {what} ({event.run_id})"
                )
            if state.cached:
                self._flush()
        elif isinstance(event, Note):
            self.pending.append(f"note: {event.message}")
            self._flush()
        elif isinstance(event, Loading):  # said once work starts, after any set-up error
            self.pending.append(f"loading {event.what} ...")
        elif isinstance(event, WaitingForRun):
            self._flush()
            tqdm.write(f"waiting: {state.detail}", file=sys.stderr)
        elif isinstance(event, Queued):
            self._flush()
            tqdm.write(
                "waiting: "
                + (event.behind or "another run is training in this store")
                + " (a quick-mode run needs the machine for seconds: give it another "
                "--runs-dir to train beside it now, or set GLEE_MAX_CONCURRENT_RUNS to "
                "train more at once)",
                file=sys.stderr,
            )
        elif isinstance(event, FeaturePass):
            self._flush()
            bar = self._open(
                state.total, unit="ex", desc=f"encoding ({state.detail}, frozen backbone)"
            )
            bar.update(state.done - bar.n)
            if state.done >= state.total:
                self.close()
        elif isinstance(event, Searching):  # each trial of the search gets its own bar
            self.close()
        elif isinstance(event, TrainStep):
            self._flush()
            bar = self._open(state.steps * state.epochs, unit="step")
            search = f"{state.search}: " if state.search else ""
            bar.set_description(f"{search}epoch {state.epoch}/{state.epochs}", refresh=False)
            if state.loss is not None:
                bar.set_postfix(loss=f"{state.loss:.4f}", refresh=False)
            bar.update((state.epoch - 1) * state.steps + state.step - bar.n)
        elif isinstance(event, Evaluated) and self.bar is not None:
            self.bar.set_postfix(
                dev_f1=f"{state.dev_f1:.4f}",
                dev_acc=f"{state.dev_acc:.4f}",
                best=f"{state.best_dev:.4f} ({state.select_metric})",
            )
        elif isinstance(event, CrossValidating):
            self._flush()
            bar = self._open(
                event.folds * event.parts,
                unit="fold",
                desc=f"choosing among {event.heads} heads: {event.folds}-fold "
                "cross-validation on train + dev",
            )
            bar.update((event.part - 1) * event.folds + event.fold - (not event.finished) - bar.n)
        elif isinstance(event, Examining):
            self._flush()
            bar = self._open(event.steps, unit="step", desc=event.task)
            bar.set_description(f"{event.task}: {event.what}", refresh=False)
            bar.update(event.step - 1 - bar.n)
        elif isinstance(event, Testing):  # a closed-form probe's first event after its line
            self.close()
            self._flush()

    def close(self):
        if self.bar is not None:
            self.bar.close()
            self.bar = None
