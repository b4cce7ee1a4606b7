"""Background training jobs, as the app launches them.

A job is a detached ``python -m glee_core train ... --progress-file F`` process: navigation,
reloads and even an app restart leave it running. Its state lives in ``<runs-dir>/.jobs/``:
``<id>.json`` (the command, pid, start time), ``<id>.progress.jsonl`` (the trainer's events),
``<id>.out`` (stdout: the result JSON as its last line) and ``<id>.err`` (stderr). The run store's
locks and queue apply as for any launch: the same configuration twice trains once.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path


_CHILDREN: list[subprocess.Popen] = []  # polled so finished jobs are reaped, not left as zombies


def jobs_dir(runs_dir: str | os.PathLike) -> Path:
    return Path(runs_dir) / ".jobs"


def _alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    if stat.is_file():  # Linux: a zombie (exited, not yet reaped) counts as gone
        try:
            return stat.read_text().split(")")[-1].split()[0] != "Z"
        except OSError:
            return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


@dataclass
class Job:
    path: Path  # <id>.json

    @property
    def id(self) -> str:
        return self.path.stem

    @cached_property
    def info(self) -> dict:
        """The launch record (command, pid, label); written once, atomically, at launch."""
        return json.loads(self.path.read_text(encoding="utf-8"))

    def _file(self, suffix: str) -> Path:
        return self.path.with_name(f"{self.id}{suffix}")

    def events(self) -> list[dict]:
        """The trainer's progress events so far (a torn last line is skipped)."""
        file = self._file(".progress.jsonl")
        if not file.is_file():
            return []
        events = []
        for line in file.read_text(encoding="utf-8").splitlines():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return events

    @property
    def result(self) -> list[dict] | None:
        out = self._file(".out")
        lines = out.read_text(encoding="utf-8").strip().splitlines() if out.is_file() else []
        try:
            return json.loads(lines[-1]) if lines else None
        except json.JSONDecodeError:
            return None

    @property
    def error(self) -> str | None:
        err = self._file(".err")
        if not err.is_file():
            return None
        lines = [ln for ln in err.read_text(encoding="utf-8", errors="replace").splitlines()
                 if ln.startswith("error:")]
        return lines[-1][len("error:"):].strip() if lines else None

    @property
    def status(self) -> str:
        """``running``, ``done``, ``failed`` (with :attr:`error`) or ``stopped`` (killed)."""
        if _alive(self.info["pid"]):
            return "running"
        if self.result is not None:
            return "done"
        return "failed" if self.error else "stopped"

    def progress(self) -> dict:
        """Where the job is: run i of n, epoch, step, dev F1 so far, and ``fraction`` done."""
        state: dict = {}
        for event in self.events():
            stage = event.get("stage")
            if stage == "run":
                state = {"run": event["index"], "runs": event["total"], "method": event["method"],
                         "seed": event["seed"], "cached": event["cached"]}
            elif stage == "train":
                state.update(epoch=event["epoch"], epochs=event["epochs"], step=event["step"],
                             steps=event["steps"], phase="training")
                if "loss" in event:
                    state["loss"] = event["loss"]
            elif stage == "eval":
                state.update(dev_f1=event["dev_f1"], dev_acc=event["dev_acc"],
                             best_dev=event["best_dev"], select_metric=event["select_metric"])
            elif stage == "features":
                state.update(phase="encoding", done=event["done"], total=event["total"])
            elif stage in ("test", "queued"):
                state["phase"] = {"test": "testing", "queued": "queued"}[stage]
        state["fraction"] = _fraction(state)
        return state

    def stop(self) -> None:
        """Stop the job (its unfinished run leaves nothing in the store)."""
        if _alive(self.info["pid"]):
            os.killpg(self.info["pid"], signal.SIGTERM)


def _fraction(state: dict) -> float:
    """Overall completion in [0, 1] of a job's progress state."""
    if not state.get("run"):
        return 0.0
    within = 0.0
    if state.get("phase") == "training" and state.get("steps"):
        within = ((state["epoch"] - 1) * state["steps"] + state["step"]) / \
            (state["epochs"] * state["steps"])
    elif state.get("phase") == "encoding" and state.get("total"):
        within = 0.2 * state["done"] / state["total"]
    return min(1.0, (state["run"] - 1 + within) / state["runs"])


def launch_training(runs_dir: str | os.PathLike, train_args: list[str],
                    label: str = "") -> Job:
    """Start ``python -m glee_core train <train_args> --runs-dir runs_dir`` in the background."""
    folder = jobs_dir(runs_dir)
    folder.mkdir(parents=True, exist_ok=True)
    job_id = time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)
    argv = [sys.executable, "-m", "glee_core", "train", *train_args,
            "--runs-dir", str(runs_dir), "--progress-file", str(folder / f"{job_id}.progress.jsonl")]
    with open(folder / f"{job_id}.out", "wb") as out, open(folder / f"{job_id}.err", "wb") as err:
        process = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                   start_new_session=True, env=dict(os.environ,
                                                                    PYTHONUNBUFFERED="1"))
    _CHILDREN.append(process)
    job = Job(folder / f"{job_id}.json")
    tmp = job.path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"id": job_id, "argv": argv, "pid": process.pid, "label": label,
                               "started": time.time()}), encoding="utf-8")
    tmp.replace(job.path)
    return job


def list_jobs(runs_dir: str | os.PathLike) -> list[Job]:
    """Jobs, newest first."""
    for child in _CHILDREN:
        child.poll()
    folder = jobs_dir(runs_dir)
    if not folder.is_dir():
        return []
    return sorted((Job(p) for p in folder.glob("*.json")), key=lambda j: j.id, reverse=True)
