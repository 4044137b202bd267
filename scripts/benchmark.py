"""Benchmark both training scripts end to end and print the figures as JSON.

    python scripts/benchmark.py                           # tiny preset, your rl/ functions, both algorithms
    python scripts/benchmark.py --preset gpt2 --algorithms ppo
    python scripts/benchmark.py --extra --num_steps 20    # extra flags go to both scripts
    python scripts/benchmark.py --level token --seeds 0 1 2       # token level, three seeds
    python scripts/benchmark.py --gpt2-shape --algorithms grpo --extra --num_steps 20   # GPU speed, no hub
    python scripts/benchmark.py --against-trl     # GRPO and DPO step time, ours vs TRL's trainers, + generation
    python scripts/benchmark.py --generation      # generation of one GRPO step against its floor

Each script runs as its own process, exactly as a user starts it, so the wall time includes
start-up (imports, loading the model and data). Per algorithm it reports: wall time, start-up,
steps per second, the mean step split into its phases (generate, score, update: everything after
scoring), generated tokens per second, the reward gain (mean of the first 10 % of steps vs the last
10 %), seconds and steps until the batch mean reward first reaches --target, peak memory (GPU
memory allocated by torch on CUDA, resident memory on a CPU), the sampling path and what recording
its CUDA graph cost (paid once per run, not part of any step), and at the token level the final KL
to the reference (``kl/ref``, mean of the last 10 % of steps). With several ``--seeds``, each seed's
figures and their median.

``--gpt2-shape`` trains a randomly initialised model of GPT-2-124M's shape (12 layers, 768 wide,
50257-token embedding) with the tiny tokenizer and prompts, built locally: GPU speed without the hub.

``--against-trl`` times TRL's trainers on the work of the project's scripts, in the same run on the
same machine: ``--rounds`` rounds (3 by default), each our run and then TRL's, so that a drift in the
machine's speed moves both sides of a round alike. It prints each side's median step time per round and the
paired ratios (TRL's / ours, round by round) with their median and range, plus ``--generation``:

- GRPO: ``GRPOTrainer`` on the same model, prompts, reward, batch shape (train_batch_size prompts x
  grpo_group_size replies of max_new_tokens), learning rate and number of steps, one update per batch
  and no reference model, as train_grpo.py does;
- DPO: ``DPOTrainer`` on the pairs train_dpo.py trained on (its pairs file), with the same batch size
  (``--dpo-extra``, by default 32 pairs a step for 60 steps), learning rate, beta and gradient clipping;
  twice: as TRL ships it (the reference model runs in every step) and with ``precompute_ref_log_probs``,
  which, as train_dpo.py, computes log pi_ref once before the steps (then the steps do the same work).
  train_dpo.py's steps also sample fresh replies every eval_every steps (TRL's do not); the median step
  leaves those few out.

TRL is a benchmark-only dependency, not in requirements.txt: if it cannot be imported, the script
installs trl==1.16.0 once, without its dependencies (transformers, accelerate and datasets are the
project's own), into a cache folder (``~/.cache/rlhf_practice/trl-1.16.0``, or under $XDG_CACHE_HOME) that
it puts on sys.path; where that fails it says so in one line and times the project alone.

``--generation`` times the sampling of one GRPO step of the settings (train_batch_size prompts x
grpo_group_size replies, max_new_tokens) on the path the run takes, against its floor: the median
forward of one token for the whole batch with a warm KV cache (the static decoder's), times the tokens
generated, timed in turn with the generations in this process; the ratio is the median of the pairs'
ratios. Nothing here is a test: it prints.

A run that cannot start (a bad setting, or one of your functions not written yet) stops the benchmark
with the script's own one-line error and exit code (2 or 3), before any figures are printed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlhf_practice.tracking import final_mean, load_run  # noqa: E402

TRL_VERSION = "1.16.0"
TRL_DIR = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rlhf_practice" / f"trl-{TRL_VERSION}"
DPO_AGAINST_TRL = ["--train_batch_size", "32", "--num_steps", "60"]  # the DPO work: 32 pairs a step, 60 steps
CANNOT_START = (2, 3)  # the scripts' exit codes for a bad setting and for an unwritten function (run_main)


def _median(values: list[float], digits: int = 3) -> float | None:
    """Median of the finite values (explained variance is NaN on steps whose rewards were all equal)."""
    finite = sorted(v for v in values if v == v)
    return round(finite[len(finite) // 2], digits) if finite else None


def benchmark(algorithm: str, preset: str, impl: str, target: float, extra: list[str]) -> dict:
    """One run of train_<algorithm>.py (``extra`` flags appended); its figures."""
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, f"train_{algorithm}.py", "--preset", preset, "--impl", impl]
        command += ["--run_dir", tmp, "--run_name", "bench", *extra]
        start = time.perf_counter()
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - start
        error = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
        if proc.returncode in CANNOT_START:  # every other run would stop the same way
            print(error, file=sys.stderr)
            sys.exit(proc.returncode)
        if proc.returncode != 0:
            return {"error": error}
        run = load_run(Path(tmp) / "bench")

    m = run.metrics
    dpo = algorithm == "dpo"  # rows: pairs; its steps sample only every eval_every steps
    rows_per_step = run.config["train_batch_size"] * run.config.get("grpo_group_size", 1)
    train_seconds = sum(m["time/step_s"])
    mean = lambda tag: round(sum(m[tag]) / len(m[tag]), 4) if m.get(tag) else None  # noqa: E731
    phases = {"generate": mean("time/generate_s"), "score": mean("time/score_s")}
    if None not in phases.values():
        phases["update"] = round(mean("time/step_s") - phases["generate"] - phases["score"], 4)
    tokens = sum(length * rows_per_step for length in m["response/length"])
    rewards = m["reward/mean"]
    first, last = final_mean(rewards[::-1]), final_mean(rewards)  # first and last 10 % of steps
    reached = run.first_reaching(target)
    return {
        "device": "cuda" if "device=cuda" in proc.stderr else "cpu",
        "steps": len(run.steps),
        "rows_per_step": rows_per_step,
        "wall_s": round(wall, 1),
        "train_s": round(train_seconds, 1),
        "startup_s": round(wall - train_seconds, 1),
        "steps_per_s": round(len(run.steps) / train_seconds, 2),
        "step_s": mean("time/step_s"),
        "step_s_after_first": round(sum(m["time/step_s"][1:]) / max(1, len(m["time/step_s"]) - 1), 4),
        "step_s_median": _median(m["time/step_s"][1:] or m["time/step_s"], digits=4),
        "phase_s": phases,
        "decoding": run.summary.get("decoding"),
        "decode_capture_s": run.summary.get("decode_capture_s"),
        "generated_tokens_per_s": None if dpo else round(tokens / train_seconds, 1),
        "reward_first_10pct": round(first, 3),
        "reward_last_10pct": round(last, 3),
        "reward_gain": round(last - first, 3),
        f"steps_to_reward_{target}": None if reached is None else reached[0],
        f"seconds_to_reward_{target}": None if reached is None else round(reached[1], 1),
        "peak_memory_mb": run.summary["peak_memory_mb"],
        "final_kl_approx": m["kl/approx"][-1] if "kl/approx" in m else None,
        "value_explained_variance_median": _median(m.get("value/explained_variance", [])),
        "final_kl_ref": round(run.final("kl/ref"), 3) if "kl/ref" in m else None,
        **({"pairs_file": run.summary.get("pairs_file"), "pairs_s": run.summary.get("pairs_s")} if dpo else {}),
    }


def build_gpt2_shape(folder: Path) -> Path:
    """A randomly initialised GPT-2-124M-shaped model with the tiny tokenizer, saved to ``folder``."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from rlhf_practice.modeling import load_tokenizer

    tokenizer = load_tokenizer("tiny")
    torch.manual_seed(0)
    config = GPT2Config(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    )  # the defaults are GPT-2-124M's: 12 layers, 12 heads, 768 wide, 1024 positions, 50257 tokens
    GPT2LMHeadModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def trl_grpo(preset: str, flags: list[str]) -> dict:
    """Mean step time of TRL's GRPOTrainer on train_grpo.py's work; the first step is left out."""
    import trl
    from datasets import Dataset
    from transformers import AutoModelForCausalLM

    from rlhf_practice.config import GRPOConfig, parse_config
    from rlhf_practice.data import build_prompt_dataloader
    from rlhf_practice.modeling import load_tokenizer, resolve_model_name
    from rlhf_practice.reward import build_reward
    from rlhf_practice.training import resolve_device

    ours = parse_config(GRPOConfig, ["--preset", preset, *flags])  # train_grpo.py's settings for these flags
    model_name = ours.model.model_name
    device = resolve_device(ours.device)
    tokenizer = load_tokenizer(model_name)
    prompts = [
        t for batch in build_prompt_dataloader(ours.data, tokenizer, 256, ours.seed) for t in batch["prompt_text"]
    ]
    reward_fn = build_reward(ours.reward)
    on_cuda = device.type == "cuda"

    def sentiment(completions: list[str], **_: object) -> list[float]:
        return [reward_fn.score(text) for text in completions]

    timer = _step_timer(on_cuda)
    rows = ours.train_batch_size * ours.grpo_group_size
    args = trl.GRPOConfig(
        per_device_train_batch_size=rows,
        num_generations=ours.grpo_group_size,
        max_completion_length=ours.max_new_tokens,
        temperature=ours.temperature,
        beta=0.0,
        num_iterations=1,
        **_trl_arguments(ours, on_cuda),
    )
    model = AutoModelForCausalLM.from_pretrained(resolve_model_name(model_name), dtype=torch.float32)
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=sentiment,
        args=args,
        train_dataset=Dataset.from_dict({"prompt": prompts}),
        processing_class=tokenizer,
        callbacks=[timer],
    )
    return _train_timed(trainer, timer)


def trl_dpo(preset: str, flags: list[str], pairs_file: str, precompute: bool) -> dict:
    """Median step time of TRL's DPOTrainer on train_dpo.py's work (its pairs, from ``pairs_file``);
    ``precompute``: log pi_ref of every pair before the steps, as train_dpo.py does (else TRL's
    default, the reference model run in every step)."""
    import trl
    from datasets import Dataset
    from transformers import AutoModelForCausalLM

    from rlhf_practice.config import DPOConfig, parse_config
    from rlhf_practice.modeling import load_tokenizer, resolve_model_name
    from rlhf_practice.preferences import read_pairs
    from rlhf_practice.training import resolve_device

    ours = parse_config(DPOConfig, ["--preset", preset, *flags])  # train_dpo.py's settings for these flags
    device = resolve_device(ours.device)
    on_cuda = device.type == "cuda"
    tokenizer = load_tokenizer(ours.model.model_name)
    pairs = read_pairs(Path(pairs_file), "pairs_file")
    timer = _step_timer(on_cuda)
    args = trl.DPOConfig(
        per_device_train_batch_size=ours.train_batch_size,
        lr_scheduler_type="constant",  # train_dpo.py: Adam at a constant rate
        weight_decay=0.0,
        beta=ours.beta,
        precompute_ref_log_probs=precompute,
        max_length=None,  # train_dpo.py truncates nothing that fits the model
        **_trl_arguments(ours, on_cuda),
    )
    model = AutoModelForCausalLM.from_pretrained(resolve_model_name(ours.model.model_name), dtype=torch.float32)
    columns = {key: [p[key] for p in pairs] for key in ("prompt", "chosen", "rejected")}
    trainer = trl.DPOTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_dict(columns),
        processing_class=tokenizer,
        callbacks=[timer],
    )
    return _train_timed(trainer, timer)


def _trl_arguments(ours: object, on_cuda: bool) -> dict:
    """The training arguments both TRL trainers take from the project's settings ``ours`` alike: learning
    rate, gradient clipping, steps, seed, device and precision; activations kept (as the project's
    scripts keep them: the same work), and no logging, saving or progress bar."""
    return dict(
        output_dir=tempfile.mkdtemp(prefix="trl-bench-"),
        learning_rate=ours.learning_rate,
        max_grad_norm=ours.max_grad_norm,
        gradient_checkpointing=False,
        max_steps=ours.num_steps,
        seed=ours.seed,
        use_cpu=not on_cuda,
        bf16=on_cuda and ours.mixed_precision,
        logging_steps=10**6,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
    )


def _train_timed(trainer: object, timer: object) -> dict:
    """Train ``trainer`` (its callbacks include ``timer``, a :func:`_step_timer`); its step times' figures."""
    import trl

    with contextlib.redirect_stdout(sys.stderr):  # TRL prints its own summary; stdout is our JSON
        trainer.train()
    return _trl_figures(trl.__version__, timer.step_times)


def _step_timer(on_cuda: bool) -> object:
    """A TrainerCallback that records each optimizer step's seconds in ``step_times``."""
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.step_times: list[float] = []

        def on_step_begin(self, *args, **kwargs):
            self.start = time.perf_counter()

        def on_step_end(self, *args, **kwargs):
            if on_cuda:
                torch.cuda.synchronize()
            self.step_times.append(time.perf_counter() - self.start)

    return StepTimer()


def _trl_figures(version: str, step_times: list[float]) -> dict:
    later = step_times[1:] or step_times
    return {
        "trl_version": version,
        "steps": len(step_times),
        "step_s_after_first": round(sum(later) / len(later), 4),
        "step_s_median": _median(later, digits=4),
    }


def import_trl() -> str | None:
    """Make ``import trl`` work: as installed, or from :data:`TRL_DIR` (installed there first if need be,
    without dependencies: transformers, accelerate and datasets are the project's). None when it works,
    else one line saying why not."""
    if importlib.util.find_spec("trl") is None:
        if not (TRL_DIR / "trl").is_dir():
            print(f"installing trl=={TRL_VERSION} into {TRL_DIR} (benchmark only) ...", file=sys.stderr, flush=True)
            command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(TRL_DIR)]
            proc = subprocess.run([*command, f"trl=={TRL_VERSION}"], capture_output=True, text=True)
            if proc.returncode != 0:
                last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
                return f"pip could not install trl=={TRL_VERSION} ({last})"
        sys.path.insert(0, str(TRL_DIR))
    try:
        import trl
    except Exception as err:  # noqa: BLE001 -- any import failure: report it in one line and go on without TRL
        return f"trl does not import here ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
    import warnings

    from transformers.utils import logging as hf_logging

    warnings.filterwarnings("ignore", category=FutureWarning)  # TRL's and transformers' deprecation notes
    hf_logging.disable_progress_bar()
    if trl.__version__ != TRL_VERSION:
        print(f"note: timing trl {trl.__version__}, not {TRL_VERSION}", file=sys.stderr)
    return None


@torch.no_grad()
def generation_floor(preset: str, flags: list[str], repeats: int = 20) -> dict:
    """Milliseconds of one GRPO step's sampling (train_batch_size x grpo_group_size replies) on the path
    a run takes, and its floor: the median one-token forward of the batch with a warm cache, times the
    tokens generated. ``repeats`` generations, each followed by its floor's forwards (so that a drift in
    the machine's speed moves both alike): the medians of both, and the median of the pairs' ratios."""
    from rlhf_practice.config import GRPOConfig, parse_config
    from rlhf_practice.sampling import Sampler, StaticCacheDecoder
    from rlhf_practice.tasks import build_task
    from rlhf_practice.training import resolve_device

    config = parse_config(GRPOConfig, ["--preset", preset, *flags])  # --task sort / add: their model and prompts
    device = resolve_device(config.device)
    task = build_task(config)
    tokenizer = task.load_tokenizer()
    policy = task.load_policy(device)
    batch = next(task.prompt_batches(tokenizer, config.train_batch_size, config.seed))
    k = config.grpo_group_size
    ids = batch["input_ids"].repeat_interleave(k, dim=0).to(device)  # (B * K, P)
    mask = batch["attention_mask"].repeat_interleave(k, dim=0).to(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else lambda: None

    def timed(fn: object) -> float:
        sync()
        start = time.perf_counter()
        fn()
        sync()
        return time.perf_counter() - start

    sampler = Sampler.from_config(policy, tokenizer, config)
    torch.manual_seed(config.seed)
    tokens = sampler.sample(ids, mask).response_ids.shape[1]  # columns generated (all rows may end early)
    decoder = StaticCacheDecoder(policy.lm, policy.bf16, use_cuda_graph=False)
    rows, width = ids.shape
    shape = (rows, decoder.num_heads, width + config.max_new_tokens, decoder.head_dim)
    dtype = torch.bfloat16 if policy.bf16 else torch.float32
    keys = [torch.randn(shape, dtype=dtype, device=device) for _ in decoder.blocks]  # a warm cache: every column
    values = [torch.randn(shape, dtype=dtype, device=device) for _ in decoder.blocks]
    last = width + config.max_new_tokens - 1  # the last token's column: it attends to the whole cache
    token = ids[:, -1:]
    position = torch.full((rows, 1), last, device=device)
    seen = torch.ones(rows, 1, 1, last + 1, dtype=torch.bool, device=device)

    def one_forward() -> None:
        with policy.autocast(), torch.no_grad():  # as the sampler runs it: no autograd graph to record
            decoder._forward(token, position, last, seen, keys, values)

    # In turn, a generation and its floor (`tokens` forwards), so that a drift in the machine's speed
    # moves both alike; the ratio is the median of the pairs' ratios. Two warm-up pairs.
    pairs = [
        (timed(lambda: sampler.sample(ids, mask)), [timed(one_forward) for _ in range(tokens)])
        for _ in range(repeats + 2)
    ][2:]
    generation = 1000 * _median([g for g, _ in pairs], digits=6)
    forward = 1000 * _median([f for _, forwards in pairs for f in forwards], digits=6)
    ratio = _median([g / sum(forwards) for g, forwards in pairs])
    floor = forward * tokens
    return {
        "task": config.task,
        "decoding": sampler.decoding,
        "rows": rows,
        "tokens": tokens,
        "generation_ms": round(generation, 2),
        "one_token_forward_ms": round(forward, 3),
        "floor_ms": round(floor, 2),
        "generation / floor": ratio,
    }


def against_trl(algorithm: str, args: argparse.Namespace, seed_flags: list[str], ours: dict) -> dict:
    """``args.rounds`` rounds of our run of ``algorithm`` (the first: ``ours``, already run) and then TRL's on the
    same work, one after the other, so that a drift in the machine's speed moves both sides of a round alike:
    each TRL trainer's figures per round, and the paired ratios (TRL's median step / ours, round by round) with
    their median and range."""
    flags = [*args.dpo_extra, *seed_flags] if algorithm == "dpo" else seed_flags
    names = ["trl_grpo"] if algorithm == "grpo" else ["trl_dpo", "trl_dpo_precomputed_ref"]
    theirs: dict[str, list[dict]] = {name: [] for name in names}
    ratios: dict[str, list[float]] = {name: [] for name in names}
    ours_steps = []
    for round_ in range(args.rounds):
        if round_:
            print(f"round {round_ + 1}: train_{algorithm}.py again ...", file=sys.stderr, flush=True)
            ours = benchmark(algorithm, args.preset, args.impl, args.target, flags)
        ours_steps.append(ours["step_s_median"])
        print(f"round {round_ + 1}: TRL's {algorithm.upper()}Trainer on the same work ...", file=sys.stderr, flush=True)
        for name in names:
            if algorithm == "grpo":
                figures = trl_grpo(args.preset, seed_flags)
            else:
                figures = trl_dpo(args.preset, flags, ours["pairs_file"], name.endswith("precomputed_ref"))
            theirs[name].append(figures)
            ratios[name].append(round(figures["step_s_median"] / ours["step_s_median"], 3))
    out: dict = {f"{algorithm}: our median step s, per round": ours_steps}
    for name in names:
        out[name] = theirs[name]
        out[f"{name}: step_s / ours, paired"] = {
            "per_round": ratios[name],
            "median": _median(ratios[name]),
            "min": min(ratios[name]),
            "max": max(ratios[name]),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--algorithms",
        nargs="*",
        choices=["ppo", "grpo", "dpo"],
        help="the scripts to run (default: ppo grpo; with --against-trl grpo dpo; none: only --generation)",
    )
    parser.add_argument("--preset", default="tiny", choices=["auto", "tiny", "gpt2"])
    parser.add_argument(
        "--impl",
        default=os.environ.get("RLHF_IMPL", "student"),
        help='whose rl/ functions the scripts run, as their --impl: "student" (your rlhf_practice/rl/; the default, as the scripts) or a folder',
    )
    parser.add_argument("--target", type=float, default=0.8, help="reward level for steps/seconds_to_reward")
    parser.add_argument("--level", default="sequence", choices=["sequence", "token"], help="the scripts' --level")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0], help="one run per seed")
    parser.add_argument("--gpt2-shape", action="store_true", help="a random GPT-2-124M-shaped model, built locally")
    parser.add_argument(
        "--against-trl",
        action="store_true",
        help="GRPO and DPO against TRL's trainers on the same work, + --generation",
    )
    parser.add_argument("--generation", action="store_true", help="one GRPO step's sampling against its floor")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="--against-trl: rounds of (our run, then TRL's), each round's ratio paired (default 3)",
    )
    parser.add_argument(
        "--dpo-extra",
        nargs="+",
        default=DPO_AGAINST_TRL,
        help="flags for train_dpo.py under --against-trl, before --extra (default: 32 pairs a step, 60 steps)",
    )
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="flags passed on to every script")
    args = parser.parse_args()
    if args.algorithms is None and not args.against_trl:
        args.algorithms = ["ppo", "grpo"]
    trl_missing = None
    if args.against_trl:
        args.algorithms = [a for a in args.algorithms or ["grpo", "dpo"] if a in ("grpo", "dpo")]
        args.generation = True
        trl_missing = import_trl()
        if trl_missing:
            print(f"note: TRL's side skipped: {trl_missing}", file=sys.stderr)
    if args.gpt2_shape:  # the folder lives until main returns
        model_dir = tempfile.TemporaryDirectory(prefix="gpt2-shape-")
        args.extra = ["--model.model_name", str(build_gpt2_shape(Path(model_dir.name))), *args.extra]
    results = {}
    for algorithm in args.algorithms:
        runs = {}
        for seed in args.seeds:
            print(f"running train_{algorithm}.py --level {args.level} --seed {seed} ...", file=sys.stderr, flush=True)
            flags = ["--level", args.level, "--seed", str(seed), *args.extra]
            if algorithm == "dpo" and args.against_trl:
                flags = [*args.dpo_extra, *flags]
            runs[seed] = benchmark(algorithm, args.preset, args.impl, args.target, flags)
        if len(runs) == 1:
            results[algorithm] = runs[args.seeds[0]]
            continue
        numbers = [k for k, v in runs[args.seeds[0]].items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        medians = {k: _median([r[k] for r in runs.values() if r.get(k) is not None]) for k in numbers}
        results[algorithm] = {"median": medians, **{f"seed_{s}": r for s, r in runs.items()}}
    if args.against_trl and not trl_missing:
        seed_flags = ["--level", args.level, "--seed", str(args.seeds[0]), *args.extra]
        for algorithm in args.algorithms:
            ours = results[algorithm].get(f"seed_{args.seeds[0]}", results[algorithm])
            if "error" in ours:
                continue
            results.update(against_trl(algorithm, args, seed_flags, ours))
    if args.generation:
        print("timing generation against its floor ...", file=sys.stderr, flush=True)
        results["generation"] = generation_floor(args.preset, ["--seed", str(args.seeds[0]), *args.extra])
    print(json.dumps({"preset": args.preset, "level": args.level, "impl": args.impl, **results}, indent=2))


if __name__ == "__main__":
    main()
