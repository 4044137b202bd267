"""Task 13's and 15's experiments with a learned reward model (run through ``scripts/experiments.py``):

    python scripts/experiments.py overoptimization   # task 15: PPO against reward models, ensembles, beta 0 / > 0
    python scripts/experiments.py rm_vs_dpo          # task 13: a reward model + PPO against DPO, on the same pairs
    python scripts/experiments.py online_rlhf        # task 16: the reward model refreshed with fresh labels

overoptimization: the gold is task 15's annotator, the sentiment reward with the excess-praise term on (GOLD:
a reader who distrusts gushing), which labels the reward models' pairs and is logged as ``reward/gold``. For
each seed, reward models (RM_FLAGS: the policy's first block) are trained on PAIR_COUNTS pairs (one pool of
pairs per seed); the ensemble of a seed is its model on ENSEMBLE_PAIRS pairs and those of the next
ENSEMBLE_K - 1 seeds (other pairs, another score head; :func:`reward_model`, cached in --out/reward_models
and shared with ``best_of_n``); then, --jobs runs at a time, token-level
PPO trains POLICY_STEPS steps against each row's reward (ROWS): one model with the KL penalty off (beta 0)
or on, or the ensemble through your ``ensemble_reward`` (``--reward_model a,b,c --reward_ensemble MODE``).
Every step logs the proxy (``reward/mean``: the reward model's score, normalised to mean 0 and std 1 over
the starting policy's replies), the gold (``reward/gold``, which the update never sees) and ``kl/ref``. The
figures read the curves smoothed over SMOOTH steps: the gold at the start (its first START steps), its peak
and the step and sqrt(kl/ref) there, its lowest point after the peak and that step, the fall to it over the
rise; the proxy at the gold's peak and at its low; where gold and proxy end (the mean of the last 10 % of
steps) and sqrt(kl/ref) there; "rose then fell" counts the seeds whose gold fell after its peak by at least
a third of its rise, to a point where the proxy stood above its value at the gold's peak (a fall while
the proxy rose: with beta 0 the policy may wander on once the proxy saturates, so the end can recover);
"ends above one model" (ensemble rows) the seeds whose gold ended above that of the seed's own model on
ENSEMBLE_PAIRS pairs alone (same beta). Gao, Schulman & Hilton's RL form,
gold gain R(d) = d (alpha - beta log d) with d = sqrt(kl/ref), is fitted to each run's smoothed curve
(alpha, beta, R^2). The curves, gold and proxy against sqrt(KL), go to --out/overoptimization.png; each
run's figures are appended to --out/overoptimization.jsonl.

online_rlhf: the same gold and reward models, PPO --beta 0 against ONLINE_ROWS: the static 1024-pair model (audited:
its labels only measure online/proxy_accuracy), the static 2048-pair model (the label-matched control: as many labels
as every refreshed row, all of the starting policy's replies) and refresh schedules of the 1024-pair model
(``--online.*``, rlhf_practice/online_labels.py); its columns (ONLINE_COLUMNS) add the labels each run trained on,
"fell a third of its rise" (without the proxy's condition: a refreshed proxy is another model), "ends above static
peak" (the gold's end above the static 1024-pair run's peak, same seed) and the detector (online/proxy_accuracy) at
its first refresh, its lowest and its last. The curves against the step, one colour per seed and each refresh marked,
go to --out/online_rlhf.png.

rm_vs_dpo: for each seed one reward model is trained on MANY pairs; DPO trains on exactly the pairs
the reward model was trained on (its ``train_pairs.jsonl``, through ``--pairs_file``), and token-level
PPO against the reward model. Both are judged on the reward model's held-out pairs (the reward model
by its scores; DPO by its implicit reward beta * (log pi - log pi_ref), whose sign on a pair is that of
the difference of the two log-ratios) and by the gold reward of fresh replies at the end.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
from side_by_side import RunFailed, run_all

ROOT = Path(__file__).resolve().parents[1]
GOLD = ["--reward.praise_penalty_weight", "1"]  # task 15's annotator and gold: a reader who distrusts gushing
# Task 15's reward models: the policy's embeddings and first block only (a smaller proxy, as Gao et al. vary it;
# it scores best_of_n's pool of 262,144 replies in about a third of the time of the whole model: 17 s against 58 s).
RM_FLAGS = ["--num_layers", "1"]
PAIR_COUNTS = (64, 256, 1024, 2048)  # best_of_n's reward models of each seed (about 2,400 pairs are there to draw from)
ENSEMBLE_PAIRS, ENSEMBLE_K = 1024, 3  # the ensemble: the models on ENSEMBLE_PAIRS pairs of its seed and the next K - 1
UWO_COEF = "0.5"  # --reward_uncertainty_coef of the uwo ensemble
POLICY_STEPS = 100
SMOOTH = 10  # steps in the moving average the figures read
START = 3  # "gold at start": the mean of the first START steps (the policy has barely moved yet)
# Minutes of one process on our idle 2-core machine at one thread, another beside it (--jobs 2), for the time printed
# up front (measured: TASKS.md's table of times): one reward model
# (its pairs included; the whole policy, and task 15's RM_FLAGS one), one PPO run of POLICY_STEPS token-level steps.
REWARD_MODEL_MINUTES, SMALL_REWARD_MODEL_MINUTES, PPO_MINUTES = 0.4, 0.16, 1.0
# online_rlhf's PPO runs, from its measured commands (TASKS.md's table of times): one whose reward model is refreshed
# (two refreshed rows, 10 runs: 13 min 7 s), and one whose labels only audit it (beside the plain control: 10 min 26 s).
REFRESHED_PPO_MINUTES, AUDITED_PPO_MINUTES = 2.6, 3.2
RM_VS_DPO_MINUTES = (1.0, 0.6)  # rm_vs_dpo's PPO run and its DPO run (held-out accuracy included), one thread
MANY = 1024  # rm_vs_dpo's reward model
PPO_STEPS = 100  # rm_vs_dpo's PPO
# (label, pairs or "ensemble", PPO flags) of task 15's grid, against GOLD
ROWS = [
    ("RM on 64 pairs, --beta 0", 64, ["--beta", "0"]),
    ("RM on 1024 pairs, --beta 0", 1024, ["--beta", "0"]),
    ("RM on 1024 pairs, --beta 0.1", 1024, ["--beta", "0.1"]),
    ("ensemble of 3 on 1024 pairs, min, --beta 0", "ensemble", ["--beta", "0", "--reward_ensemble", "min"]),
    (
        "ensemble of 3 on 1024 pairs, uwo, --beta 0",
        "ensemble",
        ["--beta", "0", "--reward_ensemble", "uwo", "--reward_uncertainty_coef", UWO_COEF],
    ),
]
# Task 16's grid (online_rlhf): the static proxy, a static proxy of as many labels as each refreshed one (its
# control), and refresh schedules, all --beta 0 and ONLINE_LABELS labels in all but the audited static row. The
# static row is audited (--online.rm_steps 0: AUDIT labels every 10 steps, which train nothing and change
# nothing of the run) to show the detector along over-optimization.
AUDIT = ["--online.refresh_every", "10", "--online.labels_per_refresh", "128", "--online.rm_steps", "0"]
ONLINE_LABELS = 2048


def ppo_minutes(flags: list[str]) -> float:
    """The up-front minutes of one PPO run of a grid with ``flags``: refreshed or audited online (online_rlhf's
    rows), else a plain one."""
    if "--online.refresh_every" not in flags:
        return PPO_MINUTES
    return AUDITED_PPO_MINUTES if audited(flags) else REFRESHED_PPO_MINUTES


def audited(flags: list[str]) -> bool:
    """Whether a run's online labels only audit its reward model (--online.rm_steps 0)."""
    return "--online.rm_steps" in flags and flags[flags.index("--online.rm_steps") + 1] == "0"


def _schedule(every: int, labels: int, *more: str) -> list[str]:
    times = (ONLINE_LABELS - 1024) // labels
    return ["--beta", "0", "--online.refresh_every", str(every), "--online.max_refreshes", str(times),
            "--online.labels_per_refresh", str(labels), *more]  # fmt: skip


ONLINE_ROWS = [
    ("static RM on 1024 pairs (audited)", 1024, ["--beta", "0", *AUDIT]),
    ("static RM on 2048 pairs (label-matched control)", 2048, ["--beta", "0"]),
    ("refresh every 20 steps, 256 labels, 4 times", 1024, _schedule(20, 256)),
    ("refresh every 10 steps, 128 labels, 8 times", 1024, _schedule(10, 128)),
    ("retrained every 10 steps, 128 labels, 8 times", 1024, _schedule(10, 128, "--online.retrain")),
    ("refresh every 20 steps, 256 labels, 4 times, new pairs only", 1024, _schedule(20, 256, "--online.no_replay")),
    (
        "refresh every 20 steps, 256 uncertain of 1024, 4 times",
        1024,
        _schedule(20, 256, "--online.selection", "uncertain"),
    ),
]
# Task 13's grid (overoptimization_sentiment, TASKS.md §13.6): the plain sentiment reward as the gold.
SENTIMENT_ROWS = [(f"RM on {p} pairs, PPO --beta {b}", p, ["--beta", b]) for p in (16, 1024) for b in ("0", "0.1")]
# name -> (the gold's flags, the reward models' flags, the rows)
GRIDS = {
    "overoptimization": (GOLD, RM_FLAGS, ROWS),
    "overoptimization_sentiment": ([], [], SENTIMENT_ROWS),
    "online_rlhf": (GOLD, RM_FLAGS, ONLINE_ROWS),
}
DROP = (
    0.1  # task 13's "over-optimized": the gold ended at least this far below its peak, the proxy above its value there
)
SENTIMENT_COLUMNS = [
    "RM held-out accuracy",
    "gold peak",
    "gold at end",
    "fall",
    "proxy at peak",
    "proxy at end",
    "√KL at peak",
    "√KL at end",
    "over-optimized",
]
COLUMNS = [
    "RM held-out accuracy",
    "gold at start",
    "gold peak",
    "step of peak",
    "√KL at peak",
    "gold low after peak",
    "step of low",
    "fall ÷ rise",
    "proxy at peak",
    "proxy at low",
    "gold at end",
    "proxy at end",
    "√KL at end",
    "rose then fell",
    "ends above one model",
    "α",
    "β",
    "R²",
]
ONLINE_COLUMNS = [
    "labels trained on",
    "gold at start",
    "gold peak",
    "step of peak",
    "gold low after peak",
    "step of low",
    "fall ÷ rise",
    "gold at end",
    "proxy at end",
    "√KL at end",
    "fell a third of its rise",
    "ends above static peak",
    "detector, first",
    "detector, lowest",
    "detector, last",
]
COUNTS = {
    "rose then fell",
    "ends above one model",
    "over-optimized",
    "fell a third of its rise",
    "ends above static peak",
}
RM_VS_DPO_ROWS = ("reward model + PPO --level token", "DPO on the same pairs")  # rm_vs_dpo's rows
DPO_COLUMNS = ["held-out pair accuracy", "final gold reward", "final kl/ref", "wall s"]


def _run(script: str, args: list[str]) -> None:
    """``python <script> args`` from the repository root; a failure raises RunFailed (its one-line error, its code)."""
    command = [sys.executable, script, *args]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        last = proc.stderr.strip().splitlines()[-1:] or [f"{' '.join(command[1:])} failed (exit {proc.returncode})"]
        raise RunFailed(last[0], proc.returncode)


def train_reward_model(tmp: Path, name: str, seed: int, pairs: int, impl: str, extra: list[str]) -> Path:
    """A reward model trained on ``pairs`` pairs (pool and held-out pairs cached in ``tmp``/pairs); its run folder."""
    args = ["--preset", "tiny", "--impl", impl, "--seed", str(seed), "--run_dir", str(tmp), "--run_name", name]
    _run("train_reward_model.py", [*args, "--pairs_dir", str(tmp / "pairs"), "--num_pairs", str(pairs), *extra])
    return tmp / name


def train_policy(tmp: Path, name: str, algorithm: str, seed: int, impl: str, flags: list[str]) -> Path:
    args = ["--preset", "tiny", "--impl", impl, "--seed", str(seed), "--run_dir", str(tmp), "--run_name", name]
    _run(f"train_{algorithm}.py", [*args, *flags])
    return tmp / name


def smooth(values: list[float], window: int = SMOOTH) -> list[float]:
    """The moving average over the last ``window`` steps (fewer at the start)."""
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v - (values[i - window] if i >= window else 0.0)
        out.append(total / min(i + 1, window))
    return out


def final(values: list[float]) -> float:
    tail = values[-max(1, len(values) // 10) :]
    return sum(tail) / len(tail)


def curves(folder: Path) -> dict[str, list[float]]:
    """proxy, gold and sqrt(kl/ref) of a run, per step, smoothed."""
    from rlhf_practice.tracking import load_run

    run = load_run(folder)
    metrics = run.metrics
    found = {
        "proxy": smooth(metrics["reward/mean"]),
        "gold": smooth(metrics["reward/gold"]),
        "sqrt_kl": smooth([max(v, 0.0) ** 0.5 for v in metrics["kl/ref"]]),
    }
    if "online/proxy_accuracy" in metrics:  # task 16: the detector at each refresh, and the labels spent
        found["detector"] = metrics["online/proxy_accuracy"]
        found["refresh_steps"] = [float(s) for s in run.tag_steps.get("online/proxy_accuracy", run.steps)]
        found["labels"] = metrics["labels/total"][-1:]
    return found


def reward_model(
    out: Path, seed: int, pairs: int, impl: str, extra: list[str], gold: list[str] = GOLD, flags: list[str] = RM_FLAGS
) -> tuple[Path, float]:
    """The folder of a reward model on ``pairs`` pairs labelled by ``gold`` (the reward's flags), trained with
    ``--seed seed`` and ``flags`` (train_reward_model.py's: task 15's RM_FLAGS by default), and its held-out
    accuracy. Kept in ``out``/reward_models under a name made of everything it depends on (the
    settings, and the text of the implementation's reward_model.py), so best_of_n and overoptimization share
    it and a rerun reuses it; the pairs of a seed are built once (``out``/pairs)."""
    from rlhf_practice.course import load_impl

    source = Path(load_impl(impl).reward_model.__file__).read_bytes()
    # the thread count too: a model trained on 2 threads differs in its last bits from one trained on 1, so a run
    # of another thread count (experiments.py --threads 1 2) must not read this one's
    threads = torch.get_num_threads()
    key = hashlib.sha1(json.dumps([seed, pairs, gold, flags, extra, threads]).encode() + source).hexdigest()[:10]
    name = f"rm-seed{seed}-pairs{pairs}-{key}"
    folder = out / "reward_models" / name / "reward_model"
    if not (folder / "reward_model.json").is_file():
        print(f"seed {seed}: reward model on {pairs} pairs ...", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(dir=out) as tmp:  # a run killed half-way leaves no folder of that name
            args = ["--preset", "tiny", "--impl", impl, "--seed", str(seed), "--run_dir", tmp, "--run_name", name]
            args += ["--pairs_dir", str(out / "pairs"), "--num_pairs", str(pairs), *gold, *flags, *extra]
            _run("train_reward_model.py", args)
            (out / "reward_models").mkdir(exist_ok=True)
            try:
                Path(tmp, name).replace(out / "reward_models" / name)
            except OSError:  # another run of the experiments made the same model meanwhile: keep that one
                if not (folder / "reward_model.json").is_file():
                    raise
    accuracy = json.loads((folder / "reward_model.json").read_text())["heldout_accuracy"]
    return folder, accuracy


def member_seeds(seed: int) -> list[int]:
    """The --seed of each model of seed ``seed``'s ensemble, all on ENSEMBLE_PAIRS pairs: its own model, then those
    of the next K - 1 seeds (seeds 0-4 share their models: 7 models, not 15, make their 5 ensembles)."""
    return [seed + j for j in range(ENSEMBLE_K)]


def models_needed(seeds: list[int], pair_counts: list[int], ensemble: bool) -> list[tuple[int, int]]:
    """The (seed, pairs) reward models that runs of ``seeds`` use: each seed's on each of ``pair_counts`` and, with
    ``ensemble``, those of its ensemble (:func:`member_seeds`, on ENSEMBLE_PAIRS pairs)."""
    ensembles = {(m, ENSEMBLE_PAIRS) for s in seeds for m in member_seeds(s)} if ensemble else set()
    return sorted({(s, p) for s in seeds for p in pair_counts} | ensembles)


def train_reward_models(
    out: Path, models: list[tuple[int, int]], impl: str, extra: list[str], gold: list[str], flags: list[str], jobs: int
) -> dict[tuple[int, int], tuple[Path, float]]:
    """Every (seed, pairs) model of ``models`` (:func:`reward_model`), ``jobs`` at a time: one worker per seed, which
    trains that seed's models in turn (they share the seed's pairs, which the first of them builds). Returns each
    model's folder and held-out accuracy by (seed, pairs)."""
    by_seed: dict[int, list[int]] = {}
    for seed, pairs in models:
        by_seed.setdefault(seed, []).append(pairs)
    work = lambda seed: [reward_model(out, seed, p, impl, extra, gold, flags) for p in by_seed[seed]]  # noqa: E731
    out.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        trained = dict(zip(by_seed, pool.map(work, by_seed)))
    return {(seed, p): model for seed, counts in by_seed.items() for p, model in zip(counts, trained[seed])}


def fit_gao(d: list[float], gain: list[float], form: str) -> dict[str, float]:
    """Least squares of the gold gain against d, no intercept: d (alpha - beta d) ("bon", best-of-n) or
    d (alpha - beta log d) ("rl"), as Gao, Schulman & Hilton fit them. Returns alpha, beta and R^2; points
    with d = 0 are left out (both forms are 0 there)."""
    d_t, gain_t = torch.as_tensor(d, dtype=torch.float64), torch.as_tensor(gain, dtype=torch.float64)
    keep = d_t > 0
    d_t, gain_t = d_t[keep], gain_t[keep]
    second = d_t * d_t if form == "bon" else d_t * torch.log(d_t)
    design = torch.stack([d_t, -second], dim=1)
    coefficients = torch.linalg.lstsq(design, gain_t[:, None]).solution[:, 0]
    residual = gain_t - design @ coefficients
    total = ((gain_t - gain_t.mean()) ** 2).sum()
    r2 = float(1 - (residual**2).sum() / total) if total > 0 else float("nan")
    return {"α": float(coefficients[0]), "β": float(coefficients[1]), "R²": r2}


def overoptimization_figures(c: dict[str, list[float]], rm_accuracy: float) -> dict[str, float]:
    """The figures of one run's smoothed curves (see the module docstring)."""
    peak = max(range(len(c["gold"])), key=c["gold"].__getitem__)
    low = min(range(peak, len(c["gold"])), key=c["gold"].__getitem__)  # the lowest point after the peak
    start, gold_end, proxy_end = c["gold"][min(START, len(c["gold"])) - 1], final(c["gold"]), final(c["proxy"])
    rise, fall, fall_to_low = c["gold"][peak] - start, c["gold"][peak] - gold_end, c["gold"][peak] - c["gold"][low]
    return {
        "RM held-out accuracy": rm_accuracy,
        "gold at start": start,
        "gold peak": c["gold"][peak],
        "step of peak": peak + 1,
        "√KL at peak": c["sqrt_kl"][peak],
        "gold at end": gold_end,
        "fall": fall,
        "gold low after peak": c["gold"][low],
        "step of low": low + 1,
        "fall ÷ rise": fall_to_low / rise if rise > 0 else float("nan"),
        "proxy at peak": c["proxy"][peak],
        "proxy at low": c["proxy"][low],
        "proxy at end": proxy_end,
        "√KL at end": final(c["sqrt_kl"]),
        "rose then fell": float(rise > 0 and fall_to_low >= rise / 3 and c["proxy"][low] > c["proxy"][peak]),
        "over-optimized": float(fall >= DROP and proxy_end > c["proxy"][peak]),
        "fell a third of its rise": float(rise > 0 and fall_to_low >= rise / 3),
        **fit_gao(c["sqrt_kl"], [g - start for g in c["gold"]], "rl"),
        **detector_figures(c.get("detector", [])),
    }


def detector_figures(detector: list[float]) -> dict[str, float]:
    """Task 16's detector (online/proxy_accuracy at each refresh or audit): its first, lowest and last value."""
    if not detector:
        return {}
    return {"detector, first": detector[0], "detector, lowest": min(detector), "detector, last": detector[-1]}


Table = tuple[list[str], list[tuple[str, list[list[float]]]]]  # columns; (row label, each column's values over seeds)


def impl_fingerprint(impl: str) -> bytes:
    """The text of every file of the implementation ``impl`` (a run depends on all of them)."""
    from rlhf_practice.course import load_impl

    folder = Path(load_impl(impl).reward_model.__file__).parent
    return b"".join(path.read_bytes() for path in sorted(folder.glob("*.py")))


def run_path(out: Path, seed: int, impl: str, flags: list[str]) -> Path:
    """Where :func:`policy_run` keeps the figures and curves of the PPO run of ``flags`` at ``seed``: under a name
    made of everything the run depends on (its flags, the reward models' folders among them, whose names hold
    their own settings; the thread count; the implementation's files)."""
    key = json.dumps([seed, flags, torch.get_num_threads()]).encode() + impl_fingerprint(impl)
    return out / "runs" / f"ppo-seed{seed}-{hashlib.sha1(key).hexdigest()[:12]}.json"


def replies_path(run: Path) -> Path:
    """Where :func:`policy_run` keeps the replies (samples.jsonl: prompt, reply, reward every sample_every steps)
    of the run kept at ``run``."""
    return run.with_suffix(".samples.jsonl")


def policy_run(
    out: Path, seed: int, impl: str, flags: list[str], accuracy: float
) -> tuple[dict[str, float], dict[str, list[float]]]:
    """A PPO run of ``flags`` against reward models (their held-out ``accuracy``, NaN for an ensemble): its figures
    and curves, kept in ``out``/runs so that a later command (another --rows, a rerun) reads them instead."""
    path = run_path(out, seed, impl, flags)
    if path.is_file():
        kept = json.loads(path.read_text())
        return kept["figures"], kept["curves"]
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        run = train_policy(Path(tmp), "ppo", "ppo", seed, impl, flags)
        c = curves(run)
        if (run / "samples.jsonl").is_file():  # the replies it wrote along the way, kept beside its figures
            shutil.copyfile(run / "samples.jsonl", replies_path(path))
    figures = overoptimization_figures(c, accuracy)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps({"figures": figures, "curves": c}))
    partial.replace(path)  # a run killed half-way leaves no file of that name
    return figures, c


def overoptimization(
    seeds: list[int],
    impl: str,
    extra: list[str],
    out: Path,
    rows: list[str],
    name: str = "overoptimization",
    jobs: int = 1,
) -> Table:
    """Run the grid ``name`` of GRIDS (its rows whose labels ``rows`` names, all when empty), ``jobs`` runs at a
    time (each run is its own process: the figures do not depend on ``jobs``); draw its curves into ``out``;
    return its table."""
    gold, rm_flags, grid = GRIDS[name]
    wanted = [row for row in grid if not rows or row[0] in rows]
    pair_counts = sorted({p for _, p, _ in wanted if p != "ensemble"})
    models = models_needed(seeds, pair_counts, any(p == "ensemble" for _, p, _ in wanted))
    runs = [(seed, row) for seed in seeds for row in wanted]
    per_model = SMALL_REWARD_MODEL_MINUTES if rm_flags == RM_FLAGS else REWARD_MODEL_MINUTES
    run_minutes = [ppo_minutes(flags) for _, (_, _, flags) in runs]
    minutes = (sum(run_minutes) + len(models) * per_model) / max(1, jobs)
    print(
        f"{name}: {len(runs)} PPO runs of {POLICY_STEPS} steps and {len(models)} reward models, {jobs} at a time: "
        f"about {minutes:.0f} minutes on our 2-core machine (less with the reward models and runs an earlier command "
        f"kept in {out})",
        file=sys.stderr,
        flush=True,
    )
    trained = train_reward_models(out, models, impl, extra, gold, rm_flags, jobs)
    calls = []
    for seed, (label, pairs, flags) in runs:
        if pairs == "ensemble":
            folders, accuracy = [trained[m, ENSEMBLE_PAIRS][0] for m in member_seeds(seed)], math.nan
        else:
            folder, accuracy = trained[seed, pairs]
            folders = [folder]
        ppo = ["--level", "token", "--num_steps", str(POLICY_STEPS), *flags, *gold, *extra]
        ppo += ["--reward_model", ",".join(str(f) for f in folders)]
        calls.append((f"seed {seed}, {label}", policy_run, (out, seed, impl, ppo, accuracy)))
    kept = [run_path(*args[:4]).is_file() for _, _, args in calls]  # by an earlier command: not logged again
    line = lambda result: ", ".join(f"{k}: {v:.3g}" for k, v in result[0].items())  # noqa: E731
    seconds = 60 * sum(m for m, done in zip(run_minutes, kept) if not done) / len(calls)
    done = run_all(f"{name} (PPO)", calls, jobs, seconds, line, processes=False)
    results = {(seed, row[0]): result for (seed, row), result in zip(runs, done)}
    figures: dict[str, list[dict[str, float]]] = {label: [] for label, _, _ in wanted}
    drawn: dict[str, list[dict[str, list[float]]]] = {label: [] for label, _, _ in wanted}
    with (out / f"{name}.jsonl").open("a") as f:
        for (seed, (label, _, _)), was_kept in zip(runs, kept):  # in the grid's order, whatever order they ended in
            this, c = results[seed, label]
            figures[label].append(this)
            drawn[label].append(c)
            if was_kept:
                continue
            record = {"row": label, "seed": seed, "impl": impl, "extra": extra, "threads": torch.get_num_threads()}
            f.write(json.dumps({**record, **this, **c}) + "\n")
    if name == "online_rlhf":
        online_columns(figures, wanted, drawn)
    single = {flags[1]: label for label, pairs, flags in wanted if pairs == ENSEMBLE_PAIRS}  # beta -> its row
    for label, pairs, flags in wanted:
        one_model = single.get(flags[1])
        for i, f in enumerate(figures[label]):
            above = pairs == "ensemble" and one_model is not None
            f["ends above one model"] = (
                float(f["gold at end"] > figures[one_model][i]["gold at end"]) if above else math.nan
            )
    path = out / f"{name}.png"
    (plot_online if name == "online_rlhf" else plot)(drawn, path, seeds)
    print(f"curves saved to {path}", file=sys.stderr)
    print("the replies each run wrote (prompt, reply, reward every sample_every steps):", file=sys.stderr)
    for (seed, (label, _, _)), (_, _, args) in zip(runs, calls):
        kept_run = run_path(*args[:4])
        replies = replies_path(kept_run)
        where = replies if replies.is_file() else f"not kept with this run (delete {kept_run} to run it again)"
        print(f"  seed {seed}, {label}: {where}", file=sys.stderr)
    columns = {"overoptimization": COLUMNS, "online_rlhf": ONLINE_COLUMNS}.get(name, SENTIMENT_COLUMNS)
    return columns, [(label, [[f[c] for f in figures[label]] for c in columns]) for label, _, _ in wanted]


def online_columns(
    figures: dict[str, list[dict[str, float]]], wanted: list, drawn: dict[str, list[dict[str, list[float]]]]
) -> None:
    """Task 16's columns that need the row: the labels each run trained on (its reward model's pairs, and the labels
    of its refreshes; an audit's labels train nothing), and whether its gold ended above the peak of the static
    1024-pair proxy's run of the same seed."""
    static = next(
        (label for label, pairs, flags in wanted if pairs == 1024 and "--online.max_refreshes" not in flags), None
    )
    for label, pairs, flags in wanted:
        audit = audited(flags)
        for i, (f, c) in enumerate(zip(figures[label], drawn[label])):
            f["labels trained on"] = float(pairs) if audit or "labels" not in c else c["labels"][-1]
            above = static is not None and static != label
            f["ends above static peak"] = (
                float(f["gold at end"] > figures[static][i]["gold peak"]) if above else math.nan
            )
            for column in ONLINE_COLUMNS:
                f.setdefault(column, math.nan)


def plot_online(drawn: dict[str, list[dict[str, list[float]]]], path: Path, seeds: list[int]) -> None:
    """Task 16: one panel per row, gold (solid) and proxy (dotted) against the step, one colour per seed, each
    refresh (or audit) of a seed marked on its gold curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, len(drawn))
    rows = math.ceil(len(drawn) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.6 * rows), squeeze=False)
    for ax, (label, runs) in zip(axes.flat, drawn.items()):
        for seed, c in zip(seeds, runs):
            colour = f"C{seed % 10}"
            steps = range(1, len(c["gold"]) + 1)
            ax.plot(steps, c["gold"], "-", color=colour, lw=1.3, label=f"seed {seed}")
            ax.plot(steps, c["proxy"], ":", color=colour, lw=1.0)
            marks = [int(s) for s in c.get("refresh_steps", [])]
            ax.plot(marks, [c["gold"][s - 1] for s in marks], "v", color=colour, ms=4)
        ax.axhline(0, color="0.6", lw=0.6)
        ax.set_title(label, fontsize=8)
        ax.set_xlabel("step", fontsize=8)
        ax.set_ylabel("gold (solid), proxy (dotted)", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, loc="upper left")
    for ax in list(axes.flat)[len(drawn) :]:
        ax.axis("off")
    fig.suptitle(
        "PPO --beta 0 against a static or refreshed reward model (▼: a refresh or audit; 10-step means)", fontsize=9
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot(drawn: dict[str, list[dict[str, list[float]]]], path: Path, seeds: list[int]) -> None:
    """One panel per setting: gold (solid, left axis) and proxy (dotted, right axis) against sqrt(kl/ref), one
    colour per seed, and Gao's RL form fitted to the seeds' points together drawn over the gold."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(4, len(drawn))
    rows = math.ceil(len(drawn) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.6 * rows), squeeze=False)
    for ax, (label, runs) in zip(axes.flat, drawn.items()):
        right = ax.twinx()
        d = [x for c in runs for x in c["sqrt_kl"]]
        gain = [g - c["gold"][min(START, len(c["gold"])) - 1] for c in runs for g in c["gold"]]
        start = sum(c["gold"][min(START, len(c["gold"])) - 1] for c in runs) / len(runs)
        for seed, c in zip(seeds, runs):  # one colour per seed: its gold solid, its proxy dotted
            ax.plot(c["sqrt_kl"], c["gold"], "-", color=f"C{seed % 10}", lw=1.2, label=f"seed {seed}: gold")
            right.plot(c["sqrt_kl"], c["proxy"], ":", color=f"C{seed % 10}", lw=0.9, alpha=0.8)
        if runs and max(d) > 0:
            fit = fit_gao(d, gain, "rl")
            x = torch.linspace(1e-3, max(d), 100, dtype=torch.float64)
            y = start + x * (fit["α"] - fit["β"] * torch.log(x))
            ax.plot(
                x,
                y,
                "--",
                color="k",
                lw=1.2,
                label=f"fit d(α−β log d): α={fit['α']:.2f} β={fit['β']:.2f} R²={fit['R²']:.2f}",
            )
        ax.set_title(label, fontsize=8)
        ax.set_xlabel("√ kl/ref (kl/ref in nats per reply; smoothed)", fontsize=8)
        ax.set_ylabel("gold (solid)")
        right.set_ylabel("proxy (dotted, same colour)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, loc="lower left")
    for ax in list(axes.flat)[len(drawn) :]:
        ax.axis("off")
    fig.suptitle(
        f"PPO against learned rewards: gold (solid) and proxy (dotted) against √KL, one colour per seed {seeds}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


@torch.no_grad()
def dpo_heldout_accuracy(run: Path, pairs_file: Path, seed: int, impl: str) -> float:
    """The share of held-out pairs on which DPO's implicit reward prefers the chosen reply:
    (log pi(c) - log pi_ref(c)) - (log pi(r) - log pi_ref(r)) > 0, pi the run's saved policy, pi_ref
    the starting policy (the tiny preset's, seeded as the run was)."""
    from rlhf_practice.config import DPOConfig, parse_config
    from rlhf_practice.course import load_impl
    from rlhf_practice.modeling import PolicyValueModel
    from rlhf_practice.preferences import PairData, read_pairs
    from rlhf_practice.tasks import build_task

    config = parse_config(DPOConfig, ["--preset", "tiny", "--seed", str(seed)])
    task = build_task(config)
    tokenizer = task.load_tokenizer()
    torch.manual_seed(seed)
    reference = task.load_policy(torch.device("cpu"))
    policy = PolicyValueModel.from_pretrained(str(run / "policy"))
    reply_logps = load_impl(impl).dpo.reply_logps
    data = PairData(read_pairs(pairs_file, "heldout pairs"), tokenizer, policy.max_length, str(pairs_file))
    right = 0
    for start in range(0, len(data), 64):
        batch = data.collate(list(range(start, min(start + 64, len(data)))))
        args = (batch.input_ids, batch.attention_mask, batch.prompt_lengths)
        ratio = reply_logps(policy.lm, *args) - reply_logps(reference.lm, *args)  # (2n,)
        chosen, rejected = ratio.chunk(2)
        right += int((chosen > rejected).sum())
    return right / len(data)


def rm_vs_dpo_seed(seed: int, impl: str, extra: list[str], wanted: list[str]) -> dict[str, dict[str, float]]:
    """One seed of :func:`rm_vs_dpo`: the reward model on MANY pairs, then the ``wanted`` rows' runs; their figures."""
    from rlhf_practice.tracking import final_mean, load_run

    rm_ppo, dpo_row = RM_VS_DPO_ROWS
    figures: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        rm = train_reward_model(tmp, "rm", seed, MANY, impl, [])
        record = json.loads((rm / "reward_model" / "reward_model.json").read_text())
        if rm_ppo in wanted:
            flags = ["--level", "token", "--num_steps", str(PPO_STEPS), "--reward_model", str(rm / "reward_model")]
            ppo = load_run(train_policy(tmp, "ppo", "ppo", seed, impl, [*flags, *extra]))
            figures[rm_ppo] = {
                "held-out pair accuracy": record["heldout_accuracy"],
                "final gold reward": final_mean(ppo.metrics["reward/gold"]),
                "final kl/ref": final_mean(ppo.metrics["kl/ref"]),
                "wall s": ppo.wall_seconds(),
            }
        if dpo_row in wanted:
            folder = train_policy(
                tmp, "dpo", "dpo", seed, impl, ["--pairs_file", str(rm / "train_pairs.jsonl"), *extra]
            )
            dpo = load_run(folder)
            values = dpo.metrics["reward/mean"]  # fresh replies every eval_every steps: the gold reward
            kl = dpo.metrics["kl/ref"]
            figures[dpo_row] = {
                "held-out pair accuracy": dpo_heldout_accuracy(folder, rm / "heldout_pairs.jsonl", seed, impl),
                "final gold reward": sum(values[-2:]) / len(values[-2:]),
                "final kl/ref": sum(kl[-2:]) / len(kl[-2:]),
                "wall s": dpo.wall_seconds(),
            }
    return figures


def rm_vs_dpo(seeds: list[int], impl: str, extra: list[str], rows: list[str], jobs: int = 1) -> Table:
    """Run the comparison (the rows of RM_VS_DPO_ROWS named in ``rows``, both when empty: the reward model is
    trained either way, DPO trains on its pairs), one seed per worker, ``jobs`` at a time; return its table."""
    wanted = [row for row in RM_VS_DPO_ROWS if not rows or row in rows]
    calls = [(f"seed {seed}", rm_vs_dpo_seed, (seed, impl, extra, wanted)) for seed in seeds]
    seconds = (REWARD_MODEL_MINUTES + RM_VS_DPO_MINUTES[0] * (RM_VS_DPO_ROWS[0] in wanted)
               + RM_VS_DPO_MINUTES[1] * (RM_VS_DPO_ROWS[1] in wanted)) * 60  # fmt: skip

    def line(figures: dict[str, dict[str, float]]) -> str:
        return "; ".join(
            f"{label}: " + ", ".join(f"{k}: {v:.3g}" for k, v in f.items()) for label, f in figures.items()
        )

    done = run_all("rm_vs_dpo", calls, jobs, seconds, line)
    return DPO_COLUMNS, [(label, [[f[label][c] for f in done] for c in DPO_COLUMNS]) for label in wanted]
