"""The Train page's time estimate: what it is based on, and that it grows with the work."""

from types import SimpleNamespace

import pytest

from glee_core.data.datasets import load_dataset
from glee_core.models.config import TrainConfig
from glee_core.models.search import search_cost
from glee_core.runs.estimate import Workload, estimate_seconds
from glee_core.runs.rates import STARTUP_SECONDS, UNMEASURED_STOP_SHARE
from glee_core.runs.run_parts import Timing


def test_estimate_grows_with_work_and_counts_the_start(toy_dataset):
    def seconds(n_runs=2, **kw):
        config = TrainConfig(**{"epochs": 3, "max_length": 64, "recipe": "paper", **kw})
        return estimate_seconds(
            Workload(
                toy_dataset, n_runs, config, model_name="m", parameters=22_700_000, device="cpu"
            ),
            runs=[],
        )

    base = seconds()
    assert "no runs yet" in base.basis and base.seconds > STARTUP_SECONDS
    assert seconds(epochs=6).seconds > base.seconds
    assert seconds(n_runs=4).seconds - STARTUP_SECONDS == pytest.approx(
        2 * (base.seconds - STARTUP_SECONDS)
    )  # the start is paid once per launch
    assert seconds(limit=5).seconds < base.seconds
    frozen = seconds(mode="frozen", recipe="practical", choose_by="dev")
    assert frozen.basis.startswith("frozen backbone") and frozen.seconds < base.seconds
    # the toy set's dev split is small: by default the compare cross-validates, at a cost
    validated = seconds(mode="frozen", recipe="practical")
    assert "then 5-fold cross-validation of each head" in validated.basis
    assert validated.seconds > frozen.seconds


def test_the_practical_recipe_estimate_counts_its_search_floor_and_lp_ft(toy_dataset):
    """The search's losing rounds, the epochs the floor on steps adds and LP-FT's heads are in
    the estimate and named in its basis; a given --lr drops the search."""

    def estimate(**kw):
        return estimate_seconds(
            Workload(toy_dataset, 1, TrainConfig(max_length=64, **kw), "m", 22_700_000, "cpu"), []
        )

    paper, practical = estimate(recipe="paper"), estimate()
    assert "search" not in paper.basis and "LP-FT" not in paper.basis
    n_train = len(toy_dataset.splits["train"])
    steps = -(-n_train // toy_dataset.batch_size) if toy_dataset.batch_size else -(-n_train // 32)
    assert f"{-(-300 // steps)} epochs to reach 300 optimizer steps" in practical.basis
    assert "learning-rate search on dev (4 rates, successive halving)" in practical.basis
    assert "LP-FT" in practical.basis and practical.seconds > paper.seconds
    fixed = estimate(lr=1e-4)
    assert "search" not in fixed.basis and fixed.seconds < practical.seconds


def stored_run(mode: str, timing: dict, model: str = "m", max_length: int = 64, cv=None, **options):
    """What the estimate reads of a finished run: its record's backbone, mode, timing, size,
    and the recipe options that cost more a step (``supcon``, ``self_distill``)."""
    hyper = {"supcon": None, "self_distill": None, **options}
    return SimpleNamespace(
        record=SimpleNamespace(
            model=SimpleNamespace(name=model),
            mode=mode,
            timing=Timing.from_dict({"device": "cpu", **timing}, "timing"),
            dataset=SimpleNamespace(sizes={"train": 100}, class_counts={}),
            hyperparameters=SimpleNamespace(
                max_length=max_length, limit=None, epochs=10, batch_size=32, **hyper
            ),
        ),
        metrics=SimpleNamespace(cv=cv),
    )


def test_the_quick_compare_estimate_comes_from_measured_rates(toy_dataset):
    """Frozen runs in the store with this backbone and device give the feature pass's tokens/s
    and the heads' examples/s; twice the measured rates, less time; other backbones' and
    fine-tuned runs do not count."""

    def frozen(runs):
        return estimate_seconds(
            Workload(
                toy_dataset,
                19,
                TrainConfig(mode="frozen", max_length=64, choose_by="dev"),
                model_name="m",
                parameters=22_700_000,
                device="cpu",
            ),
            runs=runs,
        )

    typical = frozen([])
    assert "no frozen runs with this backbone yet" in typical.basis
    # 1,000 example-epochs in 2 s: a head costs 2 ms an example and epoch
    measured = [
        stored_run(
            "frozen",
            {"feature_pass_tokens_per_second": 2000.0, "train_seconds": 1.5, "test_seconds": 0.5},
        )
    ]
    slow = frozen(measured)
    n_train = len(toy_dataset.splits["train"])
    assert slow.per_run == pytest.approx(0.002 * n_train * 10)
    assert f"feature pass 2,000 tokens/s and heads {slow.per_run:.1f} s each" in slow.basis
    assert "from 1 finished frozen run(s) with this backbone on cpu" in slow.basis
    fast = frozen(
        [
            stored_run(
                "frozen",
                {
                    "feature_pass_tokens_per_second": 4000.0,
                    "train_seconds": 0.75,
                    "test_seconds": 0.25,
                },
            )
        ]
    )
    assert fast.seconds - STARTUP_SECONDS == pytest.approx((slow.seconds - STARTUP_SECONDS) / 2)
    others = [
        stored_run("finetune", {"train_examples_per_second": 10.0, "train_seconds": 9.0}),
        stored_run("frozen", {"feature_pass_tokens_per_second": 1.0}, model="other"),
    ]
    assert frozen(others) == typical


def test_runs_slowed_by_other_work_do_not_inflate_the_estimate(toy_dataset):
    """A run shares the machine at times (a benchmark beside it): its rate is lower, never
    higher. The estimate takes the upper quartile of the finished runs' rates, so a store where
    half the runs crawled still estimates at the machine's speed, for the heads, the feature pass
    and fine-tuning alike; one fast run among slow ones does not set it."""

    def frozen(runs, mode="frozen"):
        return estimate_seconds(
            Workload(
                toy_dataset,
                19,
                TrainConfig(mode=mode, max_length=64),
                model_name="m",
                parameters=22_700_000,
                device="cpu",
            ),
            runs=runs,
        )

    def head(seconds, tokens_per_second):
        return stored_run(
            "frozen",
            {
                "feature_pass_tokens_per_second": tokens_per_second,
                "train_seconds": seconds,
                "test_seconds": 0.0,
            },
        )

    alone = frozen([head(2.0, 2000.0)] * 4)
    half_slowed = frozen([head(2.0, 2000.0)] * 4 + [head(60.0, 200.0)] * 4)
    assert half_slowed.seconds == pytest.approx(alone.seconds)
    assert "upper quartile of 8 finished frozen run(s)" in half_slowed.basis
    one_fast = frozen([head(2.0, 2000.0)] + [head(60.0, 200.0)] * 7)
    assert one_fast.seconds > 5 * alone.seconds

    def tuned(rate):
        return stored_run("finetune", {"train_examples_per_second": rate, "train_seconds": 9.0})

    fine = frozen([tuned(20.0)] * 3 + [tuned(2.0)] * 3, mode="finetune")
    assert fine.seconds == pytest.approx(frozen([tuned(20.0)] * 3, mode="finetune").seconds)


def test_a_run_on_short_texts_is_scaled_by_tokens_to_long_ones(toy_dataset):
    """A fine-tune measured on one dataset estimates another by tokens per second: the same
    examples per second on texts four times as long is a quarter of the rate. Runs recorded
    before tokens per second was kept are scaled by max length, as before."""
    from glee_core.runs.rates import mean_tokens

    config = TrainConfig(mode="finetune", max_length=64)

    def per_run(timing):
        run = stored_run("finetune", {"train_seconds": 9.0, **timing})
        return estimate_seconds(
            Workload(toy_dataset, 1, config, "m", 22_700_000, "cpu"), [run]
        ).per_run

    tokens = mean_tokens(toy_dataset, 64)
    short = per_run({"train_examples_per_second": 10.0, "train_tokens_per_second": 10 * tokens})
    long = per_run({"train_examples_per_second": 10.0, "train_tokens_per_second": 2.5 * tokens})
    assert long == pytest.approx(4 * short)
    assert per_run({"train_examples_per_second": 10.0}) == pytest.approx(short)


def test_recipe_options_that_cost_more_a_step_are_in_the_estimate(toy_dataset):
    """Self-distillation forwards each batch again through its teacher (a third of a step more),
    self-ensemble scores dev twice, and ``--supcon`` on a set with a rare class draws
    class-balanced batches, which pad more than length-grouped ones: each is in the estimate and
    its basis. A stored supcon or self-distillation run does not set a plain fine-tune's rate."""

    def estimate(runs=(), dataset=toy_dataset, **options):
        config = TrainConfig(max_length=64, recipe="paper", **options)
        return estimate_seconds(Workload(dataset, 1, config, "m", 22_700_000, "cpu"), list(runs))

    plain = estimate()
    distilled = estimate(self_distill=1.0)
    assert "teacher forwards each batch again (+1/3 a step)" in distilled.basis
    assert distilled.per_run > 1.25 * plain.per_run
    averaged = estimate(self_ensemble=True)
    assert "self-ensemble scores dev twice" in averaged.basis
    assert plain.per_run < averaged.per_run < distilled.per_run
    # the demo's texts run from 3 to 128 tokens: batches drawn by class, not length, pad more
    demo = load_dataset("demo")
    contrastive = estimate(dataset=demo, supcon=0.3)
    assert "supcon's class-balanced batches pad x1." in contrastive.basis
    assert contrastive.per_run > 1.2 * estimate(dataset=demo).per_run
    assert "supcon" not in estimate(supcon=0.3, batch_size=256).basis  # every class pairs

    def tuned(rate, **options):
        timing = {"train_examples_per_second": rate, "train_seconds": 9.0}
        return stored_run("finetune", timing, **options)

    measured = estimate([tuned(20.0)])
    slower = [tuned(5.0, supcon=0.3), tuned(5.0, self_distill=1.0)]
    assert estimate([tuned(20.0), *slower]).per_run == pytest.approx(measured.per_run)
    assert "no runs yet" in estimate(slower).basis


def test_an_estimate_leaves_out_stored_runs_and_cached_feature_passes(
    toy_dataset, tiny_bert, tmp_path
):
    """What a launch would only open costs nothing: its stored runs are not counted, and a
    frozen launch whose features the store has cached runs no feature pass."""
    from glee_core.models.methods import get_method
    from glee_core.runs.store import RunStore
    from glee_core.train.experiment import run_launch
    from glee_core.train.launch import Launch
    from glee_core.train.plan import plan_runs, uncached_passes

    store = RunStore(tmp_path / "runs")
    config = TrainConfig(mode="frozen", epochs=1)
    run_launch(Launch(toy_dataset, [get_method("cls-relu")], [1], str(tiny_bert), config, store))

    def passes(methods):
        plan = plan_runs(toy_dataset, [get_method(m) for m in methods], [1], str(tiny_bert), config)
        stored = {run.run_id for run in store.runs()}
        return uncached_passes(
            store, toy_dataset, str(tiny_bert), [job for job in plan if job.run_id not in stored]
        )

    assert passes(["cls-relu"]) == 0  # stored: nothing to encode
    assert passes(["cls-tanh"]) == 0  # the plain input's features are cached
    assert passes(["cls-tanh", "prompt"]) == 1  # the template's are not
    cached = estimate_seconds(
        Workload(toy_dataset, 1, config, "m", 22_700_000, "cpu", feature_passes=0), []
    )
    cold = estimate_seconds(Workload(toy_dataset, 1, config, "m", 22_700_000, "cpu"), [])
    assert cached.seconds < cold.seconds and "features are cached" in cached.basis
    # the bar's share of a compare's cross-validation counts the passes still to run as part of
    # the heads' runs (as much more as ENCODING_SHARE says), and none where they are cached
    from glee_core.core.progress import ENCODING_SHARE
    from glee_core.train.launch import cross_validation_share

    def share(methods):
        specs = [get_method(m) for m in methods]
        launch = Launch(toy_dataset, specs, [1], str(tiny_bert), config, store)  # 5 folds
        plan = plan_runs(toy_dataset, specs, [1], str(tiny_bert), config)
        return cross_validation_share(launch, plan, plan)

    sizes = {k: len(v) for k, v in toy_dataset.splits.items()}
    per_head = 4 * (sizes["train"] + sizes["dev"]) / sizes["train"]
    assert share(["cls-tanh"]) == pytest.approx(
        per_head / (1 + per_head)
    )  # cached: the heads' training alone
    lead = 1 + ENCODING_SHARE / (1 - ENCODING_SHARE) / 2  # one of the two formats to encode
    assert share(["cls-tanh", "prompt"]) == pytest.approx(2 * per_head / (2 * lead + 2 * per_head))


@pytest.mark.parametrize("mode", ["finetune", "frozen"])
def test_a_cpu_without_bf16_is_estimated_at_its_fp32_rate(toy_dataset, monkeypatch, mode):
    """Without runs to go on, the typical rate follows the precision the run will train in: a
    CPU without native bf16 trains in fp32 (measured ~2x slower), one with AMX tiles runs bf16
    faster, and an explicit --precision fp32 is fp32 anywhere."""
    from glee_core.core import devices
    from glee_core.runs.rates import TYPICAL_RATES, typical_rates

    def seconds(precision="auto"):
        config = TrainConfig(mode=mode, max_length=64, recipe="paper", precision=precision)
        return estimate_seconds(
            Workload(toy_dataset, 3, config, "m", 22_700_000, "cpu"), []
        ).seconds

    monkeypatch.setattr(devices, "cpu_has_bf16", lambda: True)
    monkeypatch.setattr(devices, "cpu_has_amx", lambda: False)
    assert typical_rates("cpu", "auto") == TYPICAL_RATES["cpu"]
    native = seconds()
    assert seconds("fp32") > native
    # AMX tiles train and encode in bf16 faster (measured); a quick compare's small heads were
    # measured slower on the AMX Xeon than on the EPYC (0.24 s against 0.11 s on the demo)
    monkeypatch.setattr(devices, "cpu_has_amx", lambda: True)
    assert typical_rates("cpu", "auto") == TYPICAL_RATES["cpu-amx"]
    assert mode == "frozen" or seconds() < native
    assert typical_rates("cpu", "fp32") == TYPICAL_RATES["cpu-fp32"]  # fp32 asked: no AMX
    monkeypatch.setattr(devices, "cpu_has_bf16", lambda: False)
    assert typical_rates("cpu", "auto") == TYPICAL_RATES["cpu-fp32"]
    assert seconds() == pytest.approx(seconds("fp32")) and seconds() > native
    assert typical_rates("cuda", "auto") == TYPICAL_RATES["cuda"]


def test_a_quick_compare_without_runs_is_estimated_near_what_it_took(monkeypatch):
    """The typical head and cross-validation costs against what packed heads took on the AMX
    Xeon (its median head: demo 0.24 s at 624 texts, r8-3400 0.95 s at 3,059; the cold estimate
    of a whole compare was 2.7-4.4x what it took before they were set from these) and on an EPYC
    with native bf16: within a third of each head, every kind of device has a head rate."""
    from glee_core.core import devices
    from glee_core.runs.rates import (
        HEAD_EXAMPLES_PER_S,
        HEAD_OVERHEAD_SECONDS,
        TYPICAL_RATES,
        typical_kind,
    )

    assert set(HEAD_EXAMPLES_PER_S) == set(TYPICAL_RATES) == set(HEAD_OVERHEAD_SECONDS)
    monkeypatch.setattr(devices, "cpu_has_bf16", lambda: True)
    monkeypatch.setattr(devices, "cpu_has_amx", lambda: True)
    kind = typical_kind("cpu", "auto")
    rate, overhead = HEAD_EXAMPLES_PER_S[kind], HEAD_OVERHEAD_SECONDS[kind]
    for texts, took in ((624, 0.24), (1_143, 0.37), (1_782, 0.88), (3_059, 0.95)):
        assert overhead + texts * 10 / rate == pytest.approx(took, rel=0.35)
    # an EPYC with native bf16 and no AMX: the demo's heads 0.109 s each, a new user's 572-text
    # upload's 0.089 s (their cold estimate was 3.5x the compare before these were set)
    monkeypatch.setattr(devices, "cpu_has_amx", lambda: False)
    kind = typical_kind("cpu", "auto")
    rate, overhead = HEAD_EXAMPLES_PER_S[kind], HEAD_OVERHEAD_SECONDS[kind]
    for texts, took in ((624, 0.109), (572, 0.089)):
        assert overhead + texts * 10 / rate == pytest.approx(took, rel=0.35)


def test_adapting_is_estimated_with_the_mlm_head_at_the_masked_tokens(toy_dataset, tiny_bert):
    """`adapt` runs the MLM head's transform and vocabulary decoder at the masked tokens only: the
    fallback estimate (no finished adaptation to measure) counts them at that share, and a
    finished adaptation's measured tokens per second replace it (records made before
    length-grouped batches, without ``tokens_per_epoch``, padded every text to its batch's
    longest and are not used)."""
    from transformers import AutoConfig

    from glee_core.models.backbone import estimate_parameters
    from glee_core.models.options import AdaptOptions
    from glee_core.runs.job_estimates import estimate_adapt_seconds
    from glee_core.runs.rates import mean_tokens

    config = AutoConfig.from_pretrained(tiny_bert)
    h, vocab = config.hidden_size, config.vocab_size
    encoder = estimate_parameters(str(tiny_bert))
    masked = estimate_parameters(str(tiny_bert), mlm_positions=0.15)
    assert masked - encoder == int(0.15 * (h * h + vocab * h))
    options = AdaptOptions(out="unused", epochs=2)
    plain = estimate_adapt_seconds(toy_dataset, options, encoder, "cpu")
    counted = estimate_adapt_seconds(toy_dataset, options, masked, "cpu")
    assert counted.seconds > plain.seconds
    assert counted.basis.startswith("backbone size with its MLM head at the masked tokens")

    tokens = (
        len(toy_dataset.splits["train"])
        * (1 - options.held_out)
        * mean_tokens(toy_dataset, toy_dataset.max_length)
    )
    finished = {
        "seconds": 100.0,
        "tokens_per_epoch": 5_000,
        "steps": 40,
        "options": {"epochs": 4, "batch_size": 32, "max_length": None},
    }
    measured = estimate_adapt_seconds(toy_dataset, options, masked, "cpu", [finished])
    assert measured.seconds == pytest.approx(STARTUP_SECONDS + tokens * 2 / 200.0)
    assert measured.basis == "from 1 finished adaptation(s) with this backbone on cpu"
    older = {k: v for k, v in finished.items() if k != "tokens_per_epoch"}
    assert estimate_adapt_seconds(toy_dataset, options, masked, "cpu", [older]) == counted
    # SimCSE runs no MLM head: two passes of the encoder alone, its words say so
    simcse = AdaptOptions(out="unused", epochs=2, objective="simcse", max_length=None)
    twice = estimate_adapt_seconds(toy_dataset, simcse, encoder, "cpu")
    assert twice.basis.endswith("on cpu; SimCSE's two passes a text")
    assert "MLM head" not in twice.basis
    assert twice.seconds - STARTUP_SECONDS == pytest.approx(2 * (plain.seconds - STARTUP_SECONDS))


def test_tokens_per_text_are_capped_text_by_text(toy_dataset):
    """A few long texts do not make every text count as max length: each is capped alone."""
    from glee_core.runs.rates import mean_tokens

    train = toy_dataset.splits["train"]
    chars = train["text"].str.len() + train["text_b"].str.len()
    cap = int(chars.max() / 4 + 2) - 1  # only the longest text reaches it
    expected = sum(min(c / 4 + 2, cap) for c in chars) / len(chars)
    assert mean_tokens(toy_dataset, cap) == pytest.approx(expected)


def test_a_search_once_is_paid_once_and_early_stopping_is_measured(toy_dataset):
    """Three heads with the rate searched once pay one search, not three; finished runs that
    stopped early at half their planned steps make the training a new run is estimated at half
    of theirs (runs that did not record it: the typical share)."""

    def estimate(runs=(), **kw):
        return estimate_seconds(
            Workload(
                toy_dataset, 3, TrainConfig(max_length=64, lp_ft="no", **kw), "m", 22_700_000, "cpu"
            ),
            list(runs),
        )

    once, each = estimate(), estimate(lr_search="each")
    assert "once for the launch" in once.basis and once.seconds < each.seconds
    search = search_cost(
        TrainConfig(max_length=64).resolved(64, None), len(toy_dataset.splits["train"])
    )
    base = once.per_run / (1 + search)
    assert each.seconds - once.seconds == pytest.approx(2 * base * search)
    # no finished fine-tune to measure early stopping on: the share typical of BENCHMARKS.md
    assert f"typically ends runs at {UNMEASURED_STOP_SHARE:.0%}" in once.basis
    assert once.stop == UNMEASURED_STOP_SHARE  # what the job's bar expects, as the estimate
    tuned = [
        stored_run(
            "finetune",
            {
                "train_examples_per_second": 10.0,
                "train_seconds": 9.0,
                "steps": 50,
                "planned_steps": 100,
            },
        )
    ] * 3
    half = estimate(tuned)
    assert "early stopping ends runs at 50% of their planned steps (median of 3" in half.basis
    assert half.stop == 0.5
    full = estimate(
        [stored_run("finetune", {"train_examples_per_second": 10.0, "train_seconds": 9.0})] * 3
    )
    assert half.seconds - STARTUP_SECONDS == pytest.approx(
        (full.seconds - STARTUP_SECONDS) * 0.5 / UNMEASURED_STOP_SHARE
    )


def test_a_fine_tune_after_the_quick_compare_pays_no_lp_ft_stage(toy_dataset):
    """LP-FT's heads are the quick compare's stored runs: once they are there, a fine-tune's
    estimate leaves their feature pass and training out, and says why."""

    def estimate(**kw):
        return estimate_seconds(
            Workload(
                toy_dataset,
                3,
                TrainConfig(max_length=64, lp_ft="yes"),
                "m",
                22_700_000,
                "cpu",
                **kw,
            ),
            [],
        )

    fresh, after = estimate(), estimate(lp_ft_stages=0)
    assert "LP-FT's heads on the frozen features first" in fresh.basis
    assert "LP-FT's heads stored" in after.basis and after.seconds < fresh.seconds
    one = estimate(lp_ft_stages=1)
    assert after.seconds < one.seconds < fresh.seconds


def test_an_estimate_counts_the_work_already_on_the_cpu(toy_dataset, monkeypatch):
    """A fine-tune estimated at 15 min took 54 beside other work (newcomer, round two, item 1):
    the estimate now multiplies by ``other_work``, the slowdown of the cores' worth of other
    work the launch runs beside (its pool shrinks to the cores left; more threads than cores
    share them)."""
    import os

    from glee_core.core import environment
    from glee_core.runs import busy as module

    tick = os.sysconf("SC_CLK_TCK")  # 2 cores busy for the 2 s between the two readings
    samples = iter([(100.0, 1000.0, 0.0), (100.0 + 4 * tick, 1000.0 + 4 * tick, 0.0)])
    monkeypatch.setattr(environment, "cpu_times", lambda: next(samples))
    clock = iter([0.0, 2.0])
    monkeypatch.setattr(environment.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(module, "core_count", lambda: 2)
    monkeypatch.setattr(module, "live_cpu_jobs", lambda folder: [])  # no glee job among them
    monkeypatch.setattr(environment.time, "process_time", lambda: 1.0)  # nor the asking one
    busy = module.other_work(0.0)
    # one thread (x1.4 slower a step than two), its core shared with a third of the work (x1.5)
    assert busy == pytest.approx(1.5 / (1 - module.PARALLEL_SHARE / 2))
    config = TrainConfig(epochs=4, batch_size=4)
    idle = estimate_seconds(Workload(toy_dataset, 1, config, "x", 10_000_000, "cpu"), [])
    loaded = estimate_seconds(
        Workload(toy_dataset, 1, config, "x", 10_000_000, "cpu"), [], busy=busy
    )
    start = STARTUP_SECONDS  # the start is imports on one thread: not scaled
    assert loaded.seconds == pytest.approx(start + busy * (idle.seconds - start))
    assert loaded.per_run == pytest.approx(busy * idle.per_run)
    assert f"x{busy:.1f} for the other work on this CPU now" in loaded.basis
    assert loaded.low < loaded.seconds < loaded.high  # the other work moves: a range
    gpu = estimate_seconds(Workload(toy_dataset, 1, config, "x", 10_000_000, "cuda"), [], busy=busy)
    assert "other work" not in gpu.basis  # a GPU's pace is not the CPU's load
    monkeypatch.setattr(environment, "cpu_times", lambda: None)
    assert module.other_work(0.0) == 1.0  # no /proc/stat: no guess


def test_the_slowdown_beside_other_work_follows_the_cores_it_leaves():
    """Counting each core's worth of other work as a whole run's time said x2.0 beside one busy
    core on 2 cores, where a first fine-tune of short tickets took x1.1 and r8-1500's x1.65;
    and x2.0 on a 16-core machine where the launch keeps 15 of its 16 cores."""
    from glee_core.runs.busy import slowdown

    assert slowdown(0.0, 2) == 1.0 and slowdown(0.3, 2) == pytest.approx(1.15)  # a slice
    assert 1.3 < slowdown(1.0, 2) < 1.5  # one thread of two: between the runs measured
    assert slowdown(1.0, 1) == pytest.approx(2.0)  # one core, one hog: half of it
    assert slowdown(2.0, 2) > slowdown(1.0, 2)  # a hog on each core: a share of one as well
    assert slowdown(1.0, 16) < 1.05  # 15 of 16 cores left


def test_niced_work_counts_at_the_share_it_keeps_beside_a_launch(monkeypatch, tmp_path):
    """A bench at ``nice`` 10 on both cores of two slowed a first fine-tune x1.1, where counting
    it as busy as it was said x2.0 (the estimate 3.6x what the run took): work at a lower
    priority counts at what the scheduler leaves it beside the launch (110 : 1024); a niced
    asker counts it whole. Where the kernel shares the CPU between sessions (autogroup), a
    niced matrix product in another session took a core from a quick compare (2.4 s a step
    on the one left): there niced work counts whole."""
    from glee_core.core import environment

    # (now, busy, own, niced) seconds: 2 s with both cores busy, 1.5 cores' worth of it niced
    marks = [(0.0, 100.0, 0.0, 40.0), (2.0, 104.0, 0.0, 43.0)]
    monkeypatch.setattr(environment.os, "getpriority", lambda which, who: 0)
    knob = tmp_path / "sched_autogroup_enabled"
    monkeypatch.setattr(environment, "AUTOGROUP", knob)
    for on, counted in (("0\n", 0.5 + 1.5 * environment.NICED_SHARE), ("1\n", 2.0)):
        knob.write_text(on)
        assert environment.other_cores_since(*marks) == pytest.approx(counted)
    knob.unlink()  # no such knob: processes weigh by their nice alone
    assert environment.other_cores_since(*marks) == pytest.approx(0.5 + 1.5 * 110 / 1134)
    monkeypatch.setattr(environment.os, "getpriority", lambda which, who: 10)
    assert environment.other_cores_since(*marks) == pytest.approx(2.0)


def test_where_the_kernel_shares_the_cpu_by_session_a_busy_session_keeps_its_share_only(
    monkeypatch, tmp_path
):
    """Beside a 2-thread matrix product in a session of its own the demo's compare took what it
    takes alone where the estimate counted two cores' worth of work (x2, the first self-training
    0.41 of its estimate): a launch leads a session of its own, and the kernel's autogroup gives
    each busy session its share whatever its threads."""
    import os
    import subprocess
    import sys
    import time

    from glee_core.core import environment
    from glee_core.runs.busy import slowdown

    knob = tmp_path / "sched_autogroup_enabled"
    monkeypatch.setattr(environment, "AUTOGROUP", knob)
    knob.write_text("1\n")
    assert environment.session_share_cap(2.0, 1, 2) == 1.0  # one session: a core of two
    assert environment.session_share_cap(1.0, 1, 2) == 1.0  # a one-thread hog: as it is
    # two busy sessions on two cores, or one on one core: the launch's one thread gets a
    # third, or a half, of a core, as slowdown counts a core's worth each beside it
    assert environment.session_share_cap(2.0, 2, 2) == 2.0
    one_thread = slowdown(1.0, 2)  # a launch on one thread of two, with its core to itself
    assert slowdown(environment.session_share_cap(2.0, 2, 2), 2) == pytest.approx(one_thread * 1.5)
    assert environment.session_share_cap(1.0, 1, 1) == 1.0
    assert slowdown(environment.session_share_cap(1.0, 1, 1), 1) == pytest.approx(2.0)
    assert environment.session_share_cap(16.0, 1, 16) == 8.0  # a 16-thread session: half
    assert environment.session_share_cap(2.0, 0, 2) == 2.0  # no busy session seen: as it is
    assert slowdown(environment.session_share_cap(2.0, 1, 2), 2) < 1.5 < slowdown(2.0, 2)
    knob.write_text("0\n")  # processes weigh by their threads and nice
    assert environment.session_share_cap(2.0, 1, 2) == 2.0
    # sessions counted from /proc: a busy loop in a session of its own, this one's left out
    loop = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    try:
        before = environment.session_cpu_seconds()
        assert os.getsid(0) in before
        busy_loop = os.getsid(loop.pid)
        wait = 0.6
        time.sleep(wait)
        after = environment.session_cpu_seconds()
        assert after[busy_loop] > before.get(busy_loop, 0.0)
        counted = environment.busy_sessions(before, after, wait, {os.getsid(0)})
        assert counted >= 1
        assert environment.busy_sessions(before, after, wait, {os.getsid(0), busy_loop}) < counted
    finally:
        loop.kill()
        loop.wait()


def test_heads_over_many_classes_and_steps_of_small_batches_cost_more(toy_dataset):
    """A 2,000-class upload's quick compare was estimated 10x short (a head's cost grows with
    its classes); LoRA at batch 1 was estimated at 24 min for a job of hours (E5: a step's fixed
    cost is paid every step, and batch 1 takes 32 times the steps)."""
    from dataclasses import replace as swap

    from glee_core.runs.rates import (
        HEAD_CLASS_SCALE,
        HEAD_OVERHEAD_SECONDS,
        STEP_SECONDS,
        class_factor,
        typical_kind,
    )

    assert class_factor(20) == 1.0 and class_factor(2000) == pytest.approx(
        (1 + 2000 / HEAD_CLASS_SCALE) / (1 + 20 / HEAD_CLASS_SCALE)
    )
    # one CLS head alone (the label budget's): x2.8 at 800 classes and x3.6 at 2,000, measured
    # (growing linearly had said x5.4 at 2,000: the budget's 15 heads took 160 s, not 356)
    assert class_factor(800, heads="cls") == pytest.approx(2.8, abs=0.1)
    assert class_factor(2000, heads="cls") == pytest.approx(3.6, abs=0.1)
    assert class_factor(2000, 2000, heads="cls") == class_factor(5, heads="cls") == 1.0
    quick = TrainConfig(mode="frozen", cv_folds=None, choose_by="dev")

    def heads(classes: int) -> float:
        wide = swap(toy_dataset, classes=[f"c{i}" for i in range(classes)])
        per_run = estimate_seconds(
            Workload(wide, 19, quick, "m", 22_700_000, "cpu", feature_passes=0), []
        ).per_run
        return per_run - HEAD_OVERHEAD_SECONDS[typical_kind("cpu", "auto")]  # a head's fixed part

    assert heads(2000) / heads(20) == pytest.approx(class_factor(2000), rel=0.05)
    config = TrainConfig(mode="lora", lr=1e-4, epochs=10)

    def tune(batch: int) -> float:
        return estimate_seconds(
            Workload(toy_dataset, 1, swap(config, batch_size=batch), "m", 22_700_000, "cpu"), []
        ).seconds

    n = len(toy_dataset.splits["train"])
    steps_paid = (tune(1) - tune(32)) / STEP_SECONDS["cpu"]
    assert steps_paid == pytest.approx(n * 10 * (1 - 1 / 32) * 0.7, rel=0.2)  # early stopping
    assert tune(64) >= tune(32) * 0.99  # a larger batch than the rates': not below them
