"""Task 15's best-of-n experiment (run through ``scripts/experiments.py best_of_n``).

    python scripts/experiments.py best_of_n          # 5 seeds; reward models on 64 / 256 / 1024 pairs, ensembles

The gold is task 15's annotator: the sentiment reward with the excess-praise term on (GOLD, the reader who
distrusts gushing), which labels the reward models' pairs and scores every reply. One pool of POOL_REPLIES
replies to each of POOL_PROMPTS prompts is sampled once from the starting policy (cached in --out: the
policy, prompts and sampling do not depend on the seed). For each seed, reward models are trained on
PAIR_COUNTS pairs, plus ENSEMBLE_K - 1 more on the ensemble's pair count with other seeds (their pairs and
score heads differ); each model scores the pool (normalised as a run normalises it), and for n = 1 ... N
your ``best_of_n_estimate`` gives the expected gold and proxy of best-of-n on each prompt, your
``best_of_n_kl`` its distance d = sqrt(KL) from the starting policy, and your ``ensemble_reward`` the
ensembles' proxies. Gao, Schulman & Hilton's best-of-n form, gold gain R(d) = d (alpha - beta d), is fitted
to each seed's mean curve by least squares.

Columns (median [min, max] over seeds): the model's held-out pair accuracy; "gold at n=1" (the pool's mean
gold); the gold's peak over n and the n and d where it peaks; the gold at n = N and the fall from the peak;
"fall CI excludes 0" counts the seeds whose fall (from the n of the peak to n = N) has a bootstrap 95 %
interval (prompts resampled BOOTSTRAP times) above 0; the proxy at n = N; the fitted alpha, beta, R^2 and the d of the fitted peak alpha / (2
beta). The curves (mean over seeds, fitted curves dashed) go to --out/best_of_n.png.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import time
from pathlib import Path
from types import ModuleType

import torch
from overoptimization import (
    ENSEMBLE_K,
    ENSEMBLE_PAIRS,
    GOLD,
    PAIR_COUNTS,
    REWARD_MODEL_MINUTES,
    UWO_COEF,
    ensemble_members,
    fit_gao,
    reward_model,
)

ROOT = Path(__file__).resolve().parents[1]
POOL_PROMPTS, POOL_REPLIES, POOL_SEED = 256, 1024, 0  # the pool: prompts x replies, drawn with this seed
POOL_CHUNK = 4  # prompts per sampling call (x POOL_REPLIES rows)
SCORE_BATCH = 4096  # rows per reward-model forward
BOOTSTRAP = 1000
# Minutes on our idle 2-core machine at one thread, for the time printed up front: sampling the pool (once),
# scoring it with one reward model (once per model; kept beside it).
POOL_MINUTES, SCORE_MINUTES = 8.0, 1.2
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


def sample_pool(out: Path) -> dict:
    """The pool: POOL_REPLIES replies of the starting policy to each of POOL_PROMPTS distinct prompts, their
    rows packed flush left (each distinct prompt + reply once: ``rows``, ``mask``, ``prompt_lengths``; ``index``
    (B, N) says which row each reply is) and the gold of each distinct row. Cached in ``out``."""
    from rlhf_practice.config import PPOConfig, parse_config
    from rlhf_practice.learned_reward import pack_flush_left
    from rlhf_practice.sampling import Sampler
    from rlhf_practice.tasks import build_task

    config = parse_config(PPOConfig, settings_args(POOL_SEED))
    key = json.dumps([POOL_PROMPTS, POOL_REPLIES, POOL_SEED, vars(config.data), vars(config.reward), config.model.model_name,
                      config.max_new_tokens, config.temperature, torch.__version__, torch.get_num_threads()])  # fmt: skip
    digest = hashlib.sha1(key.encode()).hexdigest()[:10]
    path = out / f"best_of_n_pool-{digest}.pt"
    if path.is_file():
        print(f"pool: read {path}", file=sys.stderr)
        return torch.load(path)
    start = time.perf_counter()
    task = build_task(config)
    tokenizer = task.load_tokenizer()
    torch.manual_seed(POOL_SEED)
    policy = task.load_policy(torch.device("cpu"))
    sampler = Sampler.from_config(policy, tokenizer, config)
    prompts: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for batch in task.prompt_batches(tokenizer, 64, POOL_SEED):
        for ids, mask, text in zip(batch["input_ids"], batch["attention_mask"], batch["prompt_text"]):
            prompts.setdefault(text, (ids[mask.bool()], mask[mask.bool()]))
        if len(prompts) >= POOL_PROMPTS:
            break
    texts = list(prompts)[:POOL_PROMPTS]
    distinct: dict[tuple[int, ...], int] = {}
    rows, prompt_lengths, prompt_of, replies, index = [], [], [], [], []
    for first in range(0, POOL_PROMPTS, POOL_CHUNK):
        chunk = texts[first : first + POOL_CHUNK]
        width = max(len(prompts[t][0]) for t in chunk)
        pad = tokenizer.pad_token_id
        input_ids = torch.stack(
            [torch.cat([torch.full((width - len(prompts[t][0]),), pad), prompts[t][0]]) for t in chunk]
        )
        attention = (torch.arange(width) >= width - torch.tensor([len(prompts[t][0]) for t in chunk])[:, None]).long()
        generation = sampler.sample(
            input_ids.repeat_interleave(POOL_REPLIES, 0), attention.repeat_interleave(POOL_REPLIES, 0)
        )
        packed, mask, lengths = pack_flush_left(generation, pad)
        decoded = generation.decode(tokenizer)
        for r in range(len(packed)):
            key_row = tuple(packed[r, : int(mask[r].sum())].tolist())
            if key_row not in distinct:
                distinct[key_row] = len(rows)
                rows.append(key_row)
                prompt_lengths.append(int(lengths[r]))
                prompt_of.append(chunk[r // POOL_REPLIES])
                replies.append(decoded[r])
            index.append(distinct[key_row])
        print(f"\rpool: {first + len(chunk)}/{POOL_PROMPTS} prompts sampled", end="", file=sys.stderr, flush=True)
    width = max(len(r) for r in rows)
    pad = tokenizer.pad_token_id
    pool = {
        "rows": torch.tensor([list(r) + [pad] * (width - len(r)) for r in rows]),
        "mask": torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows]),
        "prompt_lengths": torch.tensor(prompt_lengths),
        "index": torch.tensor(index).view(POOL_PROMPTS, POOL_REPLIES),
        "gold": task.reward(prompt_of, replies).float(),
        "replies": replies,
        "key": digest,
    }
    out.mkdir(parents=True, exist_ok=True)
    torch.save(pool, path)
    print(
        f"\npool: {POOL_PROMPTS} prompts x {POOL_REPLIES} replies, {len(rows)} distinct, sampled and scored in "
        f"{time.perf_counter() - start:.0f} s; saved to {path}",
        file=sys.stderr,
    )
    return pool


@torch.no_grad()
def score_pool(pool: dict, folder: Path, impl: ModuleType) -> torch.Tensor:
    """(U,) the normalised score of each distinct row of the pool by the reward model in ``folder`` (read
    with the implementation's ``get_reward``, as a run reads it), rows of a length together."""
    from rlhf_practice.config import PPOConfig, parse_config
    from rlhf_practice.learned_reward import LearnedReward, check_reward_model
    from rlhf_practice.tasks import build_task

    tokenizer = build_task(parse_config(PPOConfig, settings_args(0))).load_tokenizer()
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
    low, _ = bootstrap_fall(per_prompt, peak, torch.Generator().manual_seed(seed))
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
    figures.update(fit, **{"fitted peak d": fit["α"] / (2 * fit["β"]) if fit["β"] > 0 else math.inf})
    return {"figures": figures, "d": d, "gold": gold_curve, "proxy": proxy_curve}


def best_of_n(seeds: list[int], impl_name: str, extra: list[str], out: Path, rows: list[str]) -> tuple:
    """Run the experiment (the rows of ROWS whose labels ``rows`` names, all when empty); draw its curves into
    ``out``; return its table (columns, rows)."""
    from rlhf_practice.course import load_impl

    wanted = [label for label in ROWS if not rows or label in rows]
    ensemble = any("ensemble" in label for label in wanted)
    impl = load_impl(impl_name)
    # the functions these rows call: reward models trained and scoring, best-of-n's curves, the ensembles' combination
    impl.check_functions(
        ["get_reward", "reward_loss", "best_of_n_kl", "best_of_n_estimate", *["ensemble_reward"] * ensemble]
    )
    models = len({p for p in PAIR_COUNTS if f"RM on {p} pairs" in wanted} | ({ENSEMBLE_PAIRS} if ensemble else set()))
    models += (ENSEMBLE_K - 1) * ensemble
    minutes = POOL_MINUTES + len(seeds) * models * (SCORE_MINUTES + REWARD_MODEL_MINUTES)
    print(
        f"best_of_n: a pool of {POOL_PROMPTS} x {POOL_REPLIES} replies, {len(seeds) * models} reward models scoring it: "
        f"about {minutes:.0f} minutes on a 2-core machine (less with the pool and reward models of an earlier run "
        f"in {out})",
        file=sys.stderr,
    )
    pool = sample_pool(out)
    index, gold = pool["index"], pool["gold"][pool["index"]]  # (B, N)
    results: dict[str, list[dict]] = {label: [] for label in wanted}
    for seed in seeds:
        for pairs in PAIR_COUNTS:
            label = f"RM on {pairs} pairs"
            if label in wanted:
                folder, accuracy = reward_model(out, seed, pairs, impl_name, extra)
                result = curve_figures(impl.best_of_n, pool_scores(pool, folder, impl)[index], gold, accuracy, seed)
                results[label].append(result)
                print(f"  seed {seed}, {label}: " + _line(result["figures"]), file=sys.stderr)
        modes = [
            m for m in ("mean", "min", "uwo") if f"ensemble of {ENSEMBLE_K} on {ENSEMBLE_PAIRS} pairs, {m}" in wanted
        ]
        if modes:
            members = torch.stack([pool_scores(pool, f, impl) for f in ensemble_members(out, seed, impl_name, extra)])
        for mode in modes:
            label = f"ensemble of {ENSEMBLE_K} on {ENSEMBLE_PAIRS} pairs, {mode}"
            combined = impl.best_of_n.ensemble_reward(members, mode, float(UWO_COEF))
            result = curve_figures(impl.best_of_n, combined[index], gold, math.nan, seed)
            results[label].append(result)
            print(f"  seed {seed}, {label}: " + _line(result["figures"]), file=sys.stderr)
    plot(results, out / "best_of_n.png", seeds)
    print(f"curves saved to {out / 'best_of_n.png'}", file=sys.stderr)
    with (out / "best_of_n.jsonl").open("a") as f:
        for label, runs in results.items():
            for seed, r in zip(seeds, runs):
                curves = {k: r[k].tolist() for k in ("gold", "proxy")}
                f.write(json.dumps({"row": label, "seed": seed, "impl": impl_name, **r["figures"], **curves}) + "\n")
    return COLUMNS, [(label, [[r["figures"][c] for r in runs] for c in COLUMNS]) for label, runs in results.items()]


def pool_scores(pool: dict, folder: Path, impl: ModuleType) -> torch.Tensor:
    """:func:`score_pool`, kept beside the reward model (pool_scores-<pool>.pt) for the next run."""
    path = folder / f"pool_scores-{pool['key']}.pt"
    if path.is_file():
        return torch.load(path)
    scores = score_pool(pool, folder, impl.reward_model)
    torch.save(scores, path)
    return scores


def _line(figures: dict) -> str:
    return ", ".join(f"{k}: {v:.3g}" for k, v in figures.items())


def plot(results: dict[str, list[dict]], path: Path, seeds: list[int]) -> None:
    """One panel per setting: gold (left axis) and proxy (right axis) of best-of-n against d = sqrt(KL), the
    mean over seeds, with Gao's form fitted to that mean drawn dashed over the gold."""
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
        ax.plot(d, gold, "-", color="C0", label="gold (mean over seeds)")
        ax.plot(d, gold[0] + d * (fit["α"] - fit["β"] * d), "--", color="C0", alpha=0.7,
                label=f"fit d(α−βd): α={fit['α']:.3f}, β={fit['β']:.3f}, R²={fit['R²']:.2f}")  # fmt: skip
        right.plot(d, proxy, ":", color="C1", label="proxy")
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("d = √KL(best-of-n ‖ start), KL in nats")
        ax.set_ylabel("gold", color="C0")
        right.set_ylabel("proxy (std of the start's scores)", color="C1")
        ax.grid(alpha=0.3)
        lines = ax.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
        ax.legend(lines, [line.get_label() for line in lines], fontsize=7, loc="lower left")
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.suptitle(f"best-of-n against a learned reward: gold and proxy against √KL, seeds {seeds}", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
