"""Task 15's best-of-n experiment (run through ``scripts/experiments.py best_of_n``).

    python scripts/experiments.py best_of_n          # 5 seeds; reward models on 64 / 256 / 1024 pairs, ensembles

The gold is task 15's annotator: the sentiment reward with the excess-praise term on (GOLD, the reader who
distrusts gushing), which labels the reward models' pairs and scores every reply. One pool of POOL_REPLIES
replies to each of POOL_PROMPTS prompts is sampled once from the starting policy (cached in --out: the
policy, prompts and sampling do not depend on the seed; sampled in chunks by --jobs processes). For each seed,
reward models (RM_FLAGS: the policy's first block) are trained on PAIR_COUNTS pairs; the ensemble of a seed is
its model on ENSEMBLE_PAIRS pairs and those of the next ENSEMBLE_K - 1 seeds (their pairs and score heads
differ). Each model scores the pool (normalised as a run normalises it; --jobs models at a time), and for n = 1 ... N
your ``best_of_n_estimate`` gives the expected gold and proxy of best-of-n on each prompt, your
``best_of_n_kl`` its distance d = sqrt(KL) from the starting policy, and your ``ensemble_reward`` the
ensembles' proxies. Gao, Schulman & Hilton's best-of-n form, gold gain R(d) = d (alpha - beta d), is fitted
to each seed's mean curve by least squares.

Columns (median [min, max] over seeds): the model's held-out pair accuracy; "gold at n=1" (the pool's mean
gold); the gold's peak over n and the n and d where it peaks; the gold at n = N and the fall from the peak;
"fall CI excludes 0" counts the seeds whose fall (from the n of the peak to n = N) has a bootstrap 95 %
interval (prompts resampled BOOTSTRAP times) above 0; the proxy at n = N; the fitted alpha, beta, R^2 and
the d of the fitted peak alpha / (2 beta). The curves (each seed's gold, their mean, the fit dashed) go to --out/best_of_n.png.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import math
import sys
import time
from concurrent.futures import as_completed
from pathlib import Path
from types import ModuleType

import torch
from overoptimization import (
    ENSEMBLE_K,
    ENSEMBLE_PAIRS,
    GOLD,
    PAIR_COUNTS,
    RM_FLAGS,
    SMALL_REWARD_MODEL_MINUTES,
    UWO_COEF,
    fit_gao,
    member_seeds,
    models_needed,
    train_reward_models,
)
from side_by_side import worker_processes

ROOT = Path(__file__).resolve().parents[1]
POOL_PROMPTS, POOL_REPLIES, POOL_SEED = 256, 1024, 0  # the pool: prompts x replies, drawn with this seed
POOL_CHUNK = 4  # prompts per sampling call (x POOL_REPLIES rows)
SCORE_BATCH = 64  # rows per reward-model forward (small batches keep the activations in cache: 64 was fastest)
BOOTSTRAP = 1000
MEAN_CURVE_D = 2.0  # the mean-curve table's "gold at d=2": where RL's gold peaks (TASKS.md §15.6 compares them)
# Minutes of one process on our idle 2-core machine at one thread, for the time printed up front: sampling the
# pool (once), scoring it with one reward model (once per model; kept beside it).
POOL_MINUTES, SCORE_MINUTES = 4.0, 0.27
COLUMNS = [
    "RM held-out accuracy",
    "gold at n=1",
    "gold peak",
    "n at peak",
    "d at peak",
    "gold at n=N",
    "fall",
    "fall CI excludes 0",
    "proxy at n=N",
    "α",
    "β",
    "R²",
    "fitted peak d",
]
ROWS = [f"RM on {p} pairs" for p in PAIR_COUNTS]  # the settings, one row each
ROWS += [f"ensemble of {ENSEMBLE_K} on {ENSEMBLE_PAIRS} pairs, {mode}" for mode in ("mean", "min", "uwo")]
COUNTS = {"fall CI excludes 0"}  # counts of seeds, not medians


def settings_args(seed: int) -> list[str]:
    return ["--preset", "tiny", "--seed", str(seed), *GOLD]


@functools.cache
def pool_task() -> tuple:
    """The pool's settings (seed POOL_SEED, the gold), its task and tokenizer; parsed once per process, quietly
    (parse_config prints the preset, which would say it once per worker)."""
    from rlhf_practice.config import PPOConfig, parse_config
    from rlhf_practice.tasks import build_task

    with contextlib.redirect_stderr(io.StringIO()):
        config = parse_config(PPOConfig, settings_args(POOL_SEED))
    task = build_task(config)
    return config, task, task.load_tokenizer()


def pool_prompts() -> list[tuple[list[int], str]]:
    """The pool's POOL_PROMPTS distinct prompts (token ids, text), in the order the prompt stream of seed
    POOL_SEED gives them."""
    _, task, tokenizer = pool_task()
    prompts: dict[str, list[int]] = {}
    for batch in task.prompt_batches(tokenizer, 64, POOL_SEED):
        for ids, mask, text in zip(batch["input_ids"], batch["attention_mask"], batch["prompt_text"]):
            prompts.setdefault(text, ids[mask.bool()].tolist())
        if len(prompts) >= POOL_PROMPTS:
            break
    return [(ids, text) for text, ids in list(prompts.items())[:POOL_PROMPTS]]


_WORKER: dict = {}  # a worker process's sampler (built by its first chunk) and the pool it scores


def sample_chunk(first: int, chunk: list[tuple[list[int], str]], replies_each: int) -> dict:
    """``replies_each`` (POOL_REPLIES) replies of the starting policy to each prompt of ``chunk`` (prompts
    ``first``, ``first`` + 1, ... of the pool), drawn with the random numbers of seed (POOL_SEED, first), so a
    chunk is the same whichever process samples it and whenever. Returns its distinct rows (prompt + reply packed flush left, as tuples),
    their prompt lengths, replies and gold, and ``index``: which distinct row each reply is (len(chunk) x
    POOL_REPLIES). Runs in a worker process (:func:`sample_pool`)."""
    from rlhf_practice.learned_reward import pack_flush_left
    from rlhf_practice.sampling import Sampler

    config, task, tokenizer = pool_task()
    if "sampler" not in _WORKER:
        torch.manual_seed(POOL_SEED)
        _WORKER["sampler"] = Sampler.from_config(task.load_policy(torch.device("cpu")), tokenizer, config)
    sampler = _WORKER["sampler"]
    torch.manual_seed(POOL_SEED * 1_000_003 + first)
    pad = tokenizer.pad_token_id
    width = max(len(ids) for ids, _ in chunk)
    input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids, _ in chunk])
    attention = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids, _ in chunk])
    generation = sampler.sample(
        input_ids.repeat_interleave(replies_each, 0), attention.repeat_interleave(replies_each, 0)
    )
    packed, mask, lengths = pack_flush_left(generation, pad)
    decoded = generation.decode(tokenizer)
    distinct: dict[tuple[int, ...], int] = {}
    rows, prompt_lengths, prompts, replies, index = [], [], [], [], []
    for r in range(len(packed)):
        row = tuple(packed[r, : int(mask[r].sum())].tolist())
        if row not in distinct:
            distinct[row] = len(rows)
            rows.append(row)
            prompt_lengths.append(int(lengths[r]))
            prompts.append(chunk[r // replies_each][1])
            replies.append(decoded[r])
        index.append(distinct[row])
    gold = task.reward(prompts, replies).float()
    return {"rows": rows, "prompt_lengths": prompt_lengths, "replies": replies, "gold": gold, "index": index}


def sample_pool(out: Path, jobs: int) -> tuple[dict, Path]:
    """The pool: POOL_REPLIES replies of the starting policy to each of POOL_PROMPTS distinct prompts, sampled in
    chunks of POOL_CHUNK prompts by ``jobs`` worker processes (:func:`sample_chunk`: the pool does not depend on
    ``jobs``). Each distinct prompt + reply is kept once, packed flush left (``rows``, ``mask``,
    ``prompt_lengths``, ``replies``, ``gold``); ``index`` (B, N) says which row each reply is. Cached in ``out``."""
    config, _, tokenizer = pool_task()
    key = json.dumps([POOL_PROMPTS, POOL_REPLIES, POOL_SEED, POOL_CHUNK, vars(config.data), vars(config.reward),
                      config.model.model_name, config.max_new_tokens, config.temperature, torch.__version__,
                      torch.get_num_threads()])  # fmt: skip
    digest = hashlib.sha1(key.encode()).hexdigest()[:10]
    path = out / f"best_of_n_pool-{digest}.pt"
    if path.is_file():
        print(f"pool: read {path}", file=sys.stderr)
        return torch.load(path), path
    start = time.perf_counter()
    prompts = pool_prompts()
    chunks = [(first, prompts[first : first + POOL_CHUNK]) for first in range(0, POOL_PROMPTS, POOL_CHUNK)]
    parts: list[dict] = [{}] * len(chunks)
    with worker_processes(jobs) as pool:
        futures = {pool.submit(sample_chunk, first, chunk, POOL_REPLIES): i for i, (first, chunk) in enumerate(chunks)}
        for done, future in enumerate(as_completed(futures), 1):
            parts[futures[future]] = future.result()
            print(f"\rpool: {done * POOL_CHUNK}/{POOL_PROMPTS} prompts sampled", end="", file=sys.stderr, flush=True)
    rows = [row for part in parts for row in part["rows"]]
    offsets = torch.tensor([0] + [len(part["rows"]) for part in parts]).cumsum(0)
    pad = tokenizer.pad_token_id
    width = max(len(r) for r in rows)
    pool = {
        "rows": torch.tensor([list(r) + [pad] * (width - len(r)) for r in rows]),
        "mask": torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows]),
        "prompt_lengths": torch.tensor([n for part in parts for n in part["prompt_lengths"]]),
        "index": torch.cat([torch.tensor(part["index"]) + offsets[i] for i, part in enumerate(parts)]).view(
            POOL_PROMPTS, POOL_REPLIES
        ),
        "gold": torch.cat([part["gold"] for part in parts]),
        "replies": [reply for part in parts for reply in part["replies"]],
        "key": digest,
    }
    out.mkdir(parents=True, exist_ok=True)
    save_atomically(pool, path)
    print(
        f"\npool: {POOL_PROMPTS} prompts x {POOL_REPLIES} replies, {len(rows)} distinct, sampled and scored in "
        f"{time.perf_counter() - start:.0f} s by {jobs} processes; saved to {path}",
        file=sys.stderr,
    )
    return pool, path


def save_atomically(value: object, path: Path) -> None:
    """torch.save to ``path`` through a partial file: a run killed half-way leaves nothing of that name."""
    partial = path.with_name(f".{path.name}.partial")
    torch.save(value, partial)
    partial.replace(path)


def scores_path(pool: dict, folder: Path) -> Path:
    """Where the reward model in ``folder`` keeps its scores of ``pool``."""
    return folder / f"pool_scores-{pool['key']}.pt"


@torch.no_grad()
def score_pool(pool: dict, folder: Path, impl: ModuleType) -> torch.Tensor:
    """(U,) the normalised score of each distinct row of the pool by the reward model in ``folder`` (read
    with the implementation's ``get_reward``, as a run reads it), rows of a length together."""
    from rlhf_practice.learned_reward import LearnedReward, check_reward_model

    tokenizer = pool_task()[2]
    model = LearnedReward.load(check_reward_model(str(folder), "sentiment"), tokenizer, torch.device("cpu"))
    lengths = pool["mask"].sum(1)
    order = torch.argsort(lengths, stable=True)
    scores = torch.empty(len(order))
    for start in range(0, len(order), SCORE_BATCH):
        part = order[start : start + SCORE_BATCH]
        width = int(lengths[part].max())
        _, s, _ = impl.get_reward(model.model, pool["rows"][part, :width], pool["mask"][part, :width],
                                  pool["prompt_lengths"][part])  # fmt: skip
        scores[part] = s.float()
    mean, std = model.folder.normalization
    return (scores - mean) / std


def score_worker(pool_path: str, folder: str, impl_name: str) -> None:
    """:func:`score_pool` in a worker process: the scores saved beside the reward model (``pool_scores-<pool>.pt``)."""
    from rlhf_practice.course import load_impl

    if _WORKER.get("pool_path") != pool_path:
        _WORKER.update(pool=torch.load(pool_path), pool_path=pool_path)
    pool = _WORKER["pool"]
    save_atomically(score_pool(pool, Path(folder), load_impl(impl_name).reward_model), scores_path(pool, Path(folder)))


def bootstrap_fall(per_prompt: torch.Tensor, peak: int, generator: torch.Generator) -> tuple[float, float]:
    """The 95 % interval of the fall from column ``peak`` (where the mean curve peaks) to the last column, over
    BOOTSTRAP resamplings of the prompts; ``per_prompt`` (B, N) holds each prompt's curve. The fall at a fixed
    column can be negative, so an interval above 0 says the curve really ends lower than at its peak."""
    prompts = per_prompt.shape[0]
    picks = torch.randint(prompts, (BOOTSTRAP, prompts), generator=generator)
    counts = torch.zeros(BOOTSTRAP, prompts, dtype=torch.float64).scatter_add_(
        1, picks, torch.ones(BOOTSTRAP, prompts, dtype=torch.float64)
    )
    curves = counts @ per_prompt[:, [peak, -1]].double() / prompts  # (BOOTSTRAP, 2)
    falls = curves[:, 0] - curves[:, 1]
    low, high = torch.quantile(falls, torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
    return low, high


def curve_figures(bon: ModuleType, proxy: torch.Tensor, gold: torch.Tensor, accuracy: float, seed: int) -> dict:
    """The figures of one proxy (B, N) against the gold (B, N), and the mean curves they come from."""
    per_prompt = bon.best_of_n_estimate(proxy, gold)  # (B, N)
    gold_curve = per_prompt.double().mean(0)
    proxy_curve = bon.best_of_n_estimate(proxy, proxy).double().mean(0)
    n = torch.arange(1, proxy.shape[1] + 1)
    d = bon.best_of_n_kl(n).double().sqrt()
    peak = int(torch.argmax(gold_curve))
    low, high = bootstrap_fall(per_prompt, peak, torch.Generator().manual_seed(seed))
    figures = {
        "RM held-out accuracy": accuracy,
        "gold at n=1": float(gold_curve[0]),
        "gold peak": float(gold_curve[peak]),
        "n at peak": peak + 1,
        "d at peak": float(d[peak]),
        "gold at n=N": float(gold_curve[-1]),
        "fall": float(gold_curve[peak] - gold_curve[-1]),
        "fall CI excludes 0": float(low > 0),
        "proxy at n=N": float(proxy_curve[-1]),
    }
    fit = fit_gao(d.tolist(), (gold_curve - gold_curve[0]).tolist(), "bon")
    figures.update(fit, **{"fitted peak d": fitted_peak(fit)})
    return {"figures": figures, "d": d, "gold": gold_curve, "proxy": proxy_curve, "fall CI": (low, high)}


def fitted_peak(fit: dict[str, float]) -> float:
    """The d where Gao's best-of-n form d (alpha - beta d) peaks: alpha / (2 beta); inf when it never turns."""
    return fit["α"] / (2 * fit["β"]) if fit["β"] > 0 else math.inf


def mean_curve_tables(results: dict[str, list[dict]], seeds: list[int]) -> str:
    """Two markdown tables under the main one: Gao's best-of-n form fitted to each row's curve averaged over the
    seeds (the curve best_of_n.png draws), with the gold where d = sqrt(KL) is nearest MEAN_CURVE_D (to hold
    against RL at the same distance); and each seed's fall from its peak with its bootstrap 95 % interval."""
    lines = [f"Gao's best-of-n form fitted to the mean curve over seeds {', '.join(map(str, seeds))}:", ""]
    lines += [
        f"| run | gold peak | n at peak | d at peak | gold at d={MEAN_CURVE_D:g} | gold at n=N | fall | α | β | R² | fitted peak d |"
    ]
    lines += ["|---" * 11 + "|"]
    for label, runs in results.items():
        if not runs:
            continue
        d, gold = runs[0]["d"], torch.stack([r["gold"] for r in runs]).mean(0)
        peak, near = int(torch.argmax(gold)), int(torch.argmin((d - MEAN_CURVE_D).abs()))
        fit = fit_gao(d.tolist(), (gold - gold[0]).tolist(), "bon")
        cells = [
            gold[peak],
            peak + 1,
            d[peak],
            gold[near],
            gold[-1],
            gold[peak] - gold[-1],
            fit["α"],
            fit["β"],
            fit["R²"],
            fitted_peak(fit),
        ]
        shown = [str(c) if isinstance(c, int) else f"{float(c):.3g}" for c in cells]  # n at peak as a whole number
        lines.append(f"| {label} | " + " | ".join(shown) + " |")
    lines += ["", "Each seed's fall from its peak to n = N, with its bootstrap 95 % interval (prompts resampled):", ""]
    lines += ["| run | " + " | ".join(f"seed {s}" for s in seeds) + " |", "|---" * (len(seeds) + 1) + "|"]
    for label, runs in results.items():
        cells = [f"{r['figures']['fall']:.3f} [{r['fall CI'][0]:.3f}, {r['fall CI'][1]:.3f}]" for r in runs]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def best_of_n(seeds: list[int], impl_name: str, extra: list[str], out: Path, rows: list[str], jobs: int = 1) -> tuple:
    """Run the experiment (the rows of ROWS whose labels ``rows`` names, all when empty), ``jobs`` processes at a
    time (the figures do not depend on ``jobs``); draw its curves into ``out``; return its table (columns, rows)."""
    from rlhf_practice.course import load_impl

    wanted = [label for label in ROWS if not rows or label in rows]
    modes = [m for m in ("mean", "min", "uwo") if f"ensemble of {ENSEMBLE_K} on {ENSEMBLE_PAIRS} pairs, {m}" in wanted]
    impl = load_impl(impl_name)
    # the functions these rows call: reward models trained and scoring, best-of-n's curves, the ensembles' combination
    impl.check_functions(
        ["get_reward", "reward_loss", "best_of_n_kl", "best_of_n_estimate", *["ensemble_reward"] * bool(modes)]
    )
    pair_counts = [p for p in PAIR_COUNTS if f"RM on {p} pairs" in wanted]
    models = models_needed(seeds, pair_counts, bool(modes))
    minutes = POOL_MINUTES + len(models) * (SCORE_MINUTES + SMALL_REWARD_MODEL_MINUTES)
    print(
        f"best_of_n: a pool of {POOL_PROMPTS} x {POOL_REPLIES} replies and {len(models)} reward models scoring it, "
        f"{jobs} processes at a time: about {minutes / max(1, jobs):.0f} minutes on our 2-core machine (less with the "
        f"pool and reward models of an earlier run in {out})",
        file=sys.stderr,
        flush=True,
    )
    pool, pool_path = sample_pool(out, jobs)
    folders = train_reward_models(out, models, impl_name, extra, GOLD, RM_FLAGS, jobs)  # (folder, accuracy)
    score_all(pool, pool_path, [f for f, _ in folders.values()], impl_name, jobs)
    index, gold = pool["index"], pool["gold"][pool["index"]]  # (B, N)
    results: dict[str, list[dict]] = {label: [] for label in wanted}
    for seed in seeds:
        for pairs in pair_counts:
            label = f"RM on {pairs} pairs"
            folder, accuracy = folders[seed, pairs]
            result = curve_figures(impl.best_of_n, pool_scores(pool, folder)[index], gold, accuracy, seed)
            results[label].append(result)
            print(f"  seed {seed}, {label}: " + _line(result["figures"]), file=sys.stderr)
        if modes:
            members = torch.stack([pool_scores(pool, folders[m, ENSEMBLE_PAIRS][0]) for m in member_seeds(seed)])
        for mode in modes:
            label = f"ensemble of {ENSEMBLE_K} on {ENSEMBLE_PAIRS} pairs, {mode}"
            combined = impl.best_of_n.ensemble_reward(members, mode, float(UWO_COEF))
            result = curve_figures(impl.best_of_n, combined[index], gold, math.nan, seed)
            results[label].append(result)
            print(f"  seed {seed}, {label}: " + _line(result["figures"]), file=sys.stderr)
    print(mean_curve_tables(results, seeds) + "\n")
    plot(results, out / "best_of_n.png", seeds)
    print(f"curves saved to {out / 'best_of_n.png'}", file=sys.stderr)
    with (out / "best_of_n.jsonl").open("a") as f:
        for label, runs in results.items():
            for seed, r in zip(seeds, runs):
                curves = {k: r[k].tolist() for k in ("gold", "proxy")}
                record = {"row": label, "seed": seed, "impl": impl_name, "threads": torch.get_num_threads()}
                f.write(json.dumps({**record, **r["figures"], **curves}) + "\n")
    return COLUMNS, [(label, [[r["figures"][c] for r in runs] for c in COLUMNS]) for label, runs in results.items()]


def pool_scores(pool: dict, folder: Path) -> torch.Tensor:
    """The scores :func:`score_worker` kept beside the reward model in ``folder``."""
    return torch.load(scores_path(pool, folder))


def score_all(pool: dict, pool_path: Path, folders: list[Path], impl_name: str, jobs: int) -> None:
    """Score the pool with every model of ``folders`` that has not scored it yet, ``jobs`` models at a time."""
    todo = [f for f in dict.fromkeys(folders) if not scores_path(pool, f).is_file()]
    if not todo:
        return
    start = time.perf_counter()
    with worker_processes(jobs) as workers:
        futures = [workers.submit(score_worker, str(pool_path), str(f), impl_name) for f in todo]
        for done, future in enumerate(as_completed(futures), 1):
            future.result()
            print(f"\rpool scored by {done}/{len(todo)} reward models", end="", file=sys.stderr, flush=True)
    print(f" in {time.perf_counter() - start:.0f} s", file=sys.stderr)


def _line(figures: dict) -> str:
    return ", ".join(f"{k}: {v:.3g}" for k, v in figures.items())


def plot(results: dict[str, list[dict]], path: Path, seeds: list[int]) -> None:
    """One panel per setting: gold (left axis) and proxy (right axis) of best-of-n against d = sqrt(KL). Each seed's
    gold is a thin line of its own colour; with several seeds their mean is drawn thick, with Gao's form fitted to it
    dashed. The drawn gold's peak and its value at n = N are marked, with the fall between them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(label, runs) for label, runs in results.items() if runs]
    cols = min(3, len(panels))
    fig, axes = plt.subplots(math.ceil(len(panels) / cols), cols, figsize=(5 * cols, 3.6 * math.ceil(len(panels) / cols)),
                             squeeze=False)  # fmt: skip
    for ax, (label, runs) in zip(axes.flat, panels):
        d = runs[0]["d"]
        gold = torch.stack([r["gold"] for r in runs]).mean(0)
        proxy = torch.stack([r["proxy"] for r in runs]).mean(0)
        fit = fit_gao(d, gold - gold[0], "bon")
        right = ax.twinx()
        one = len(runs) == 1
        for seed, r in zip(seeds, runs):
            ax.plot(d, r["gold"], "-", color=f"C{seed % 10}", lw=0.8 if not one else 1.6, alpha=0.45 if not one else 1,
                    label=f"gold, seed {seed}")  # fmt: skip
        if not one:
            ax.plot(d, gold, "-", color="k", lw=1.8, label=f"gold, mean over {len(runs)} seeds")
        what = "gold" if one else "mean"
        ax.plot(d, gold[0] + d * (fit["α"] - fit["β"] * d), "--", color="0.35",
                label=f"fit to the {what}: d(α−βd), α={fit['α']:.3f}, β={fit['β']:.3f}, R²={fit['R²']:.2f}")  # fmt: skip
        peak = int(gold.argmax())
        ax.plot([d[peak], d[-1]], [gold[peak], gold[-1]], "v", color="k", ms=5)
        ax.annotate(f"peak {gold[peak]:.3f} at n={peak + 1}\nn=N: {gold[-1]:.3f} (fall {gold[peak] - gold[-1]:.3f})",
                    (d[peak], gold[peak]), xytext=(0.03, 0.97), textcoords="axes fraction", fontsize=7, va="top")  # fmt: skip
        right.plot(d, proxy, ":", color="C1", label="proxy" if one else "proxy, mean over seeds")
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("d = √KL(best-of-n ‖ start), KL in nats")
        ax.set_ylabel("gold", color="k")
        right.set_ylabel("proxy (std of the start's scores)", color="C1")
        ax.grid(alpha=0.3)
        lines = ax.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
        ax.legend(lines, [line.get_label() for line in lines], fontsize=6, loc="lower right")
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.suptitle(f"best-of-n against a learned reward: gold and proxy against √KL, seeds {seeds}", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
