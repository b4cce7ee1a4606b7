"""A new user's labelling loop, clicked in Chromium (issue #80's "done when"): a long-tailed CSV
and a pool of unlabelled texts, then three rounds of 50: suggest, answer each text in the app
(one click on its class in the first text's row of class buttons, as a user with the true label
in mind), add, Home's quick compare on the version with them, and what Home then says (tail F1
before and after, what random texts would have given).

    python bench/labelling_rounds.py [--rounds 3] [--n 50] [--classes 17] [--random] [--work DIR]

The data: R52's 17 most frequent classes from its dev and test files, half of every class held
out as the pool (:func:`data_and_pool`: ~1,000 texts in the CSV, split 70/10/20 by the loader;
~600 in the pool, long-tailed as the data; the pool's labels kept here, never shown to the app:
they are the user's answers). Serves the app from this tree on a
fresh store under ``--work`` (the offline backbone). Printed: each round's seconds (suggest,
answering, the compare), the tail texts among those picked, Home's before/after line and its
random line, and the same comparison recomputed from the stored runs (the recommended head of each
dataset on the same test texts, tail by the data as it was), which is the gain on test. Run it
alone: the seconds are a measure.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from glee_core.data.datasets import load_dataset  # noqa: E402
from glee_core.pool.labelling import LabellingSession  # noqa: E402
from glee_core.runs.store import RunStore  # noqa: E402
from glee_core.train.jobs import list_jobs  # noqa: E402
from tests.helpers.streamlit_server import (  # noqa: E402
    CHROMIUM,
    FLAGS,
    click_until,
    open_page,
    serve,
    upload_in_browser,
)


def data_and_pool(data_dir: Path, folder: Path, classes: int = 17) -> tuple[Path, Path, dict]:
    """R52's ``classes`` most frequent classes from its dev and test files: half of every class
    held out as the pool (a class's half cut to 150 texts), the rest the CSV (each class cut to
    300); the pool file holds a text column alone, and each pool text's true class is returned
    (the user's answers)."""
    frames = [pd.read_csv(data_dir / "r52" / f"{s}.tsv", sep="\t") for s in ("dev", "test")]
    frame = pd.concat(frames)[["text", "label"]].dropna().drop_duplicates("text")
    frame = frame[frame["label"].isin(frame["label"].value_counts().index[:classes])]
    pool_parts, data_parts = [], []
    for _, group in frame.groupby("label"):
        group = group.sample(frac=1.0, random_state=0)
        held = len(group) // 2
        pool_parts.append(group.iloc[: min(held, 150)])
        data_parts.append(group.iloc[held:].iloc[:300])
    pool, data = pd.concat(pool_parts).sample(frac=1.0, random_state=1), pd.concat(data_parts)
    csv, pool_path = folder / f"r52-{classes}-labelled.csv", folder / "pool.csv"
    data.to_csv(csv, index=False)
    pool[["text"]].to_csv(pool_path, index=False)
    return csv, pool_path, {_key(t): c for t, c in zip(pool["text"], pool["label"], strict=True)}


def _key(text: str) -> str:
    return " ".join(str(text).split())


def wait_job(store: RunStore, kind: str, before: set[str], seconds: float = 1800) -> float:
    """Seconds until the new job of ``kind`` (one not in ``before``) ends; an error if it failed."""
    started, deadline = time.time(), time.time() + seconds
    while time.time() < deadline:
        new = [j for j in list_jobs(store) if j.id not in before and j.kind.name == kind]
        if new and new[0].status != "running":
            if new[0].status != "done":
                raise SystemExit(f"the {kind} job ended {new[0].status}: {new[0].error}")
            return time.time() - started
        time.sleep(1)
    raise SystemExit(f"no {kind} job ended within {seconds:.0f} s")


def answer_all(page, store: RunStore, truth: dict, n: int) -> tuple[int, int]:
    """Answer every suggestion of the newest session with its true class, one click each on the
    first text's class buttons (``key-<pool row>-<key>``); (answered now, clicks retried). A
    later round's session holds the earlier rounds' answers too."""
    session_path = max(store.labelling_dir.glob("*.json"), key=lambda p: p.stat().st_mtime)
    retried, already = 0, len(LabellingSession.read(session_path).answers)
    for _ in range(3 * n):
        session = LabellingSession.read(session_path)
        if len(session.answers) >= len(session.rows):
            return len(session.answers) - already, retried
        keyed = page.locator('[class*="st-key-key-"]').first
        keyed.wait_for(timeout=60_000)
        pool_row = re.search(r"st-key-key-(\d+)-", keyed.get_attribute("class")).group(1)
        row = next(r for r in session.rows if str(int(r["pool_row"])) == pool_row)
        label = truth[_key(row["text"])]
        # each button shows its class, then its key
        buttons = page.locator(f'[class*="st-key-key-{pool_row}-"] button')
        shown = [text.split("\n")[0].strip() for text in buttons.all_inner_texts()]
        if label not in shown:
            raise SystemExit(f"no button for {label!r} among {shown}")
        button = buttons.nth(shown.index(label))
        before = len(session.answers)
        button.click()
        deadline = time.time() + 30
        while len(LabellingSession.read(session_path).answers) == before:
            if time.time() > deadline:
                retried += 1
                break
            time.sleep(0.1)
        # the page's rerun draws the next text: answer that one, not this one again
        page.locator(f'[class*="st-key-key-{pool_row}-"]').first.wait_for(
            state="detached", timeout=30_000
        )
    raise SystemExit("the answers did not all land")


def home_says(page) -> tuple[str, str]:
    """Home's before/after line and its random line (or what it says instead)."""
    line = page.get_by_text(re.compile(r"^Tail F1 ")).first
    line.wait_for(timeout=120_000)
    random = page.get_by_text(re.compile("random texts would have|Texts picked at random"))
    return line.inner_text(), random.first.inner_text() if random.count() else "(none)"


def random_rounds(csv: Path, pool: Path, truth: dict, store: RunStore, rounds: int, n: int):
    """What random texts give on the same data (``--random``): for each round, as many pool
    texts as the walk had added by then, drawn at random (their true labels), added to the data;
    the quick compare of the library (every head, Home's choice) on each, and its tail F1 before
    and after as Home computes it (the data's own tail, the same test texts). Printed."""
    import numpy as np  # noqa: PLC0415

    from glee_core.models.config import TrainConfig  # noqa: PLC0415
    from glee_core.models.methods import METHODS  # noqa: PLC0415
    from glee_core.pool.labelling import before_after  # noqa: PLC0415
    from glee_core.train.experiment import run_launch  # noqa: PLC0415
    from glee_core.train.launch import Launch  # noqa: PLC0415

    def compare(dataset):
        return run_launch(
            Launch(dataset, list(METHODS.values()), [1], "auto", TrainConfig(mode="frozen"), store)
        )

    base = load_dataset(f"csv:{csv}")
    before, counts = compare(base), base.class_counts("train").to_dict()
    texts = pd.read_csv(pool)["text"]
    order = np.random.default_rng(0).permutation(len(texts))
    for number in range(1, rounds + 1):
        drawn = texts.iloc[order[: number * n]]
        path = csv.with_name(f"random-{number * n}.csv")
        pd.DataFrame({"text": drawn, "label": [truth[_key(t)] for t in drawn]}).to_csv(
            path, index=False
        )
        added = load_dataset(f"csv:{csv}", add=str(path))
        gained = {c: k - counts.get(c, 0) for c, k in added.class_counts("train").items()}
        said = before_after(before, compare(added), counts, gained, base.head_tail()[1])
        tail_added = sum(v for c, v in gained.items() if c in base.head_tail()[1])
        print(
            f"  random {number * n} ({tail_added} tail texts): tail F1 {said.tail_f1[0]:.1f} -> "
            f"{said.tail_f1[1]:.1f} ({said.tail_f1[1] - said.tail_f1[0]:+.1f}), macro-F1 "
            f"{said.f1[0]:.1f} -> {said.f1[1]:.1f}: {said.method_before} before, "
            f"{said.method_after} after",
            flush=True,
        )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument(
        "--random",
        action="store_true",
        help="then the same numbers of random pool texts added, each compared as Home compares",
    )
    parser.add_argument(
        "--classes", type=int, default=17, help="R52's most frequent classes to keep (few: 4)"
    )
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--work", default=str(ROOT / ".glee" / "bench-labelling"), type=Path)
    args = parser.parse_args(argv)
    from playwright.sync_api import expect, sync_playwright  # noqa: PLC0415 (the test extra)

    work = args.work
    shots = work / "shots"
    shots.mkdir(parents=True, exist_ok=True)
    csv, pool, truth = data_and_pool(Path(args.data_dir), work, args.classes)
    tail = set(load_dataset(f"csv:{csv}").head_tail()[1])
    store = RunStore(work / "runs")
    env = {
        "GLEE_RUNS_DIR": str(store.root),
        "GLEE_UPLOADS_DIR": str(work / "uploads"),
        "GLEE_DATA_DIR": str(work / "data"),
    }
    with serve(env) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        page.goto(url)
        upload_in_browser(page, csv.name, csv.read_bytes())

        def compare(name: str) -> float:
            open_page(page, "Home", "Glee Studio")
            button = page.get_by_role("button", name=re.compile("^Quick compare on "))
            expect(button).to_be_visible(timeout=120_000)
            before = {j.id for j in list_jobs(store)}
            button.click()
            took = wait_job(store, "train", before)
            print(f"  {name}: quick compare {took:.0f} s", flush=True)
            return took

        compare("the data as it came")
        for number in range(1, args.rounds + 1):
            print(f"round {number}", flush=True)
            open_page(page, "Data")
            region = page.get_by_role("region", name=re.compile("Unlabelled texts"))
            if number == 1:
                region.locator('input[type="file"]').set_input_files(str(pool))
                expect(region).to_contain_text(pool.name, timeout=60_000)
            count = page.get_by_label("Texts to suggest")
            count.fill(str(args.n))
            count.press("Enter")
            page.wait_for_timeout(1500)
            suggest = page.get_by_role("button", name=re.compile("^Suggest (texts to label|again)"))
            before = {j.id for j in list_jobs(store)}
            suggest.first.click()
            took = wait_job(store, "suggest", before)
            print(f"  suggest {args.n}: {took:.0f} s", flush=True)
            started = time.time()
            answered, retried = answer_all(page, store, truth, args.n)
            session = max(store.labelling_dir.glob("*.json"), key=lambda q: q.stat().st_mtime)
            rows = LabellingSession.read(session).rows[-args.n :]  # this round's
            picked = [truth[_key(r["text"])] for r in rows]
            print(
                f"  answered {answered} in {time.time() - started:.0f} s "
                f"({(time.time() - started) / max(answered, 1):.1f} s a text, {retried} retried); "
                f"tail texts among them {sum(c in tail for c in picked)}",
                flush=True,
            )
            add = page.get_by_role("button", name=re.compile(r"^Add the \d+ labelled texts"))
            # added: the version with them chosen, its file named by the labels it holds
            made = page.get_by_text(re.compile(rf"labelled-{number * args.n}\.csv")).first
            click_until(page, add, made, "add")
            compare(f"round {number}'s version")
            open_page(page, "Home", "Glee Studio")
            line, random = home_says(page)
            page.screenshot(path=str(shots / f"home-round-{number}.png"), full_page=True)
            print(f"  Home: {line}\n  Home: {random}", flush=True)
        browser.close()
    if args.random:
        print("random texts instead", flush=True)
        random_rounds(csv, pool, truth, store, args.rounds, args.n)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
