"""Check, in a few minutes on one GPU, what a GPU user runs; print one table (check, status, figure).

    python scripts/gpu_check.py                  # exit 0: every check ok, 1: a check failed
    python scripts/gpu_check.py --out gpu.md     # the table also to a file, each failure's output after it

Without CUDA it says so in one line and exits 2. Every change since the GPU path last ran was tested on
CPUs only; these checks cover it:

1. The training scripts on ``cuda``, each in its own process as a user starts it (``--preset tiny``, the
   answer key where this copy has one, a few steps, small batches): PPO and GRPO at both levels, GRPO-clip
   with task 14's options (RLOO + CISPO, GSPO + Dr. GRPO, DAPO's dynamic sampling and clip-higher on
   ``--task sort``), DPO, the reward model, then PPO with ``--reward_model`` on that model (on an untrained
   stand-in if the reward model failed, so that the two fail apart), and GRPO against the ensemble of that
   model and the stand-in (task 15's ``--reward_ensemble uwo``). Each must exit 0 and leave metrics.csv
   with one row a step and finite numbers (``value/explained_variance`` may be NaN, as the tests allow),
   and must have sampled with the static KV cache and a recorded CUDA graph.
2. The static decoder with its CUDA graph against Hugging Face ``generate`` on the tiny model. The
   contract (rlhf_practice/sampling.py, docs/GUIDE.md): both paths draw ``torch.multinomial``'s
   exponential race from the same generator, so under the same seed they sample the same tokens and
   leave the generator in the same state; only bfloat16 rounding may change a token. So in float32 the
   tokens, masks, the random numbers drawn after, and the scored log-probs must be equal, for the six
   sampling settings of tests/test_sampling.py, greedy decoding, prompt widths on and off the multiple of
   8 the graph pads to, and GRPO groups (the shared prefill); a mismatch reports how far the two paths'
   logits were apart there. In bfloat16 (what ``mixed_precision``, on by default, gives the gpt2 preset
   on CUDA) the share of identical replies is only reported.
3. The log-probs at temperatures 0.5, 1 and 1.7: per reply token, the distribution the decoder sampled
   from (its logits / T) and the scoring pass (``evaluate_tokens``) against the tempered log-softmax of
   one plain forward of the whole sequence; float32 within 1e-3 nats, bfloat16 within loose bounds.
4. A GPT-2-124M-shaped model (``GPT2Config()``, random weights, built here: no hub) in bfloat16: the
   float32 tokens again, decode milliseconds per token (static + CUDA graph, static eager, ``generate``),
   then PPO and GRPO steps of the gpt2 preset's shapes (64 replies; 16 prompts x 4; 24 new tokens) and
   GRPO with ``--lora_r 8`` (peft): median step time and peak memory (``torch.cuda.max_memory_allocated``).

``--device cpu`` is for testing this script only: the same checks on the CPU (no CUDA graph, no
bfloat16; the GPT-2-shaped work cut to a few rows), to see that every check runs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

NO_CUDA_EXIT = 2
FAILED_EXIT = 1
NAN_OK = {"value/explained_variance"}  # NaN on a step whose rewards all tie, as in CleanRL (tests/test_scripts.py)
GRAPH_FALLBACK = "recording the decode step as a CUDA graph failed"  # the sampler's note when it decodes eagerly
# nats per token. Float32 kernels of other shapes differ by about 1e-5 here; a temperature applied twice or not
# at all, or a cache column off by one, moves log-probs by tenths of a nat.
FP32_TOLERANCE = 1e-3
# bfloat16 keeps 8 bits: the decoder runs the LM head in bfloat16 under autocast, the scoring pass in float32,
# so each token's log-prob may differ by about |logit| / T * 2**-8. Loose bounds, to catch a broken path.
BF16_MAX_TOLERANCE, BF16_MEAN_TOLERANCE = 0.5, 0.05
# Replies of short reviews (1 to 9 tokens, so several padding widths); two are whole reviews, which end early.
PROMPTS = [
    "The plot",
    "I watched this film last week with my",
    "What a",
    "It is one of the worst musical",
    "Great",
    "The acting is really wonderful. 9 out of 10.",
    "Skip this one.",
    "David Webb is",
]
SAMPLING = {  # tests/test_sampling.py's settings
    "plain": {},
    "T=0.5": {"temperature": 0.5},
    "T=1.7": {"temperature": 1.7},
    "top_k=5": {"top_k": 5},
    "top_p=0.8": {"top_p": 0.8},
    "all three": {"temperature": 1.3, "top_k": 50, "top_p": 0.9},
}
TEMPERATURES = (0.5, 1.0, 1.7)
TINY = ["--preset", "tiny", "--data.max_samples", "256"]  # every training run's first flags
STEPS = ["--num_steps", "3"]  # the tiny runs' steps
# The gpt2 preset's batch shapes on the GPT-2-shaped model (its data needs the hub: the tiny prompts instead).
GPT2_SHAPE = {
    "ppo": ["--train_batch_size", "64", "--ppo_epochs", "4", "--max_new_tokens", "24", "--num_steps", "4"],
    "grpo": ["--train_batch_size", "16", "--grpo_group_size", "4", "--max_new_tokens", "24", "--num_steps", "4"],
}
GPT2_SHAPE_CPU = {  # the dry run's: a few rows, two steps
    "ppo": ["--train_batch_size", "4", "--ppo_epochs", "1", "--max_new_tokens", "6", "--num_steps", "2"],
    "grpo": ["--train_batch_size", "2", "--grpo_group_size", "2", "--max_new_tokens", "6", "--num_steps", "2"],
}


@dataclass
class Check:
    """One row of the table: ``figure`` says what was measured; ``detail`` is what to read when it failed."""

    name: str
    ok: bool
    figure: str
    detail: str = ""


Result = tuple[bool, str]  # what an in-process check returns: (ok, figure)


def format_table(checks: list[Check], seconds: float | None = None) -> str:
    """The Markdown table of ``checks`` (a ``|`` inside a cell escaped) and one line of totals."""
    cell = lambda text: " ".join(str(text).split()).replace("|", "\\|")  # noqa: E731
    rows = [("check", "status", "figure")] + [(c.name, "ok" if c.ok else "FAIL", c.figure) for c in checks]
    widths = [max(len(cell(row[i])) for row in rows) for i in range(2)]
    lines = [f"| {cell(a):<{widths[0]}} | {cell(b):<{widths[1]}} | {cell(c)} |" for a, b, c in rows]
    lines.insert(1, f"|{'-' * (widths[0] + 2)}|{'-' * (widths[1] + 2)}|---|")
    failed = sum(not c.ok for c in checks)
    total = f"{len(checks)} checks, {failed} failed" + (f", {seconds:.0f} s" if seconds is not None else "")
    return "\n".join(lines) + "\n\n" + total + "\n"


def exit_code(checks: list[Check]) -> int:
    """0 when every check passed (and there was one), else :data:`FAILED_EXIT`."""
    return 0 if checks and all(c.ok for c in checks) else FAILED_EXIT


def report(checks: list[Check], seconds: float | None = None) -> str:
    """The table, then the detail of each failed check (what --out holds)."""
    failures = [f"## {c.name}\n\n```\n{c.detail.strip()}\n```\n" for c in checks if not c.ok and c.detail.strip()]
    return format_table(checks, seconds) + ("\n" + "\n".join(failures) if failures else "")


# ----------------------------------------------------------------------------- training runs, one process each


@dataclass
class Runner:
    """Starts the training scripts: the device, the implementation, where the runs go, and a deadline."""

    device: str
    impl: str
    run_dir: Path
    deadline: float  # time.monotonic() after which nothing new starts
    threads: int  # OMP_NUM_THREADS of each run

    def folder(self, name: str) -> Path:
        """The run folder of the check ``name``: its words joined by dashes."""
        return self.run_dir / re.sub(r"[^\w.]+", "-", name).strip("-")

    def run(
        self,
        name: str,
        script: str,
        flags: list[str],
        expect: tuple[str, ...] = (),
        figure: Callable[[object, float], str] | None = None,
    ) -> Check:
        """``python script --preset tiny ... flags`` to its end, checked. ``expect``: tags metrics.csv must have;
        ``figure(run, seconds)``: the figure of a run that passed (default: steps, seconds, last reward/mean)."""
        left = self.deadline - time.monotonic()
        if left < 20:
            return _PROGRESS.ended(Check(name, False, "not run: the time given (--deadline) was spent"))
        command = [sys.executable, script, *TINY, "--device", self.device, "--impl", self.impl]
        command += ["--run_dir", str(self.run_dir), "--run_name", self.folder(name).name, *flags]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        env.setdefault("OMP_NUM_THREADS", str(self.threads))
        _say(f"start {name}")
        start = time.monotonic()
        try:
            proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=left)
        except subprocess.TimeoutExpired as err:
            return _PROGRESS.ended(Check(name, False, f"timed out after {left:.0f} s", _tail(err.stderr)))
        seconds = time.monotonic() - start
        detail = " ".join(command[1:]) + "\n" + _tail(proc.stderr)
        if proc.returncode != 0:
            last = _tail(proc.stderr, 1) or "no output"
            return _PROGRESS.ended(Check(name, False, f"exit {proc.returncode} after {seconds:.0f} s: {last}", detail))
        from rlhf_practice.tracking import load_run

        run = load_run(self.folder(name))
        problems = run_problems(run, int(run.config.get("num_steps", 0)), expect, proc.stderr, self.device)
        if problems:
            return _PROGRESS.ended(Check(name, False, "; ".join(problems), detail))
        return _PROGRESS.ended(Check(name, True, (figure or _run_figure)(run, seconds)))


def _run_figure(run: object, seconds: float) -> str:
    """A tiny run's figure: steps, seconds (start-up included), the last reward/mean, the graph's capture."""
    figure = f"{len(run.steps)} steps, {seconds:.0f} s"
    if "reward/mean" in run.metrics:
        figure += f", reward/mean {run.metrics['reward/mean'][-1]:.3f}"
    if run.summary.get("decode_capture_s"):
        figure += f", graph capture {run.summary['decode_capture_s']:.2f} s"
    return figure


def run_problems(run: object, steps: int, expect: tuple[str, ...], stderr: str, device: str) -> list[str]:
    """What is wrong with a finished run folder: rows, tags, non-finite numbers, the sampling path."""
    problems = []
    if run.steps != list(range(1, steps + 1)):
        problems.append(f"metrics.csv steps {run.steps}, expected 1..{steps}")
    missing = [tag for tag in expect if tag not in run.metrics]
    if missing:
        problems.append(f"no {', '.join(missing)} in metrics.csv")
    bad = sorted(
        tag for tag, values in run.metrics.items() if tag not in NAN_OK and not all(map(math.isfinite, values))
    )
    if bad:
        problems.append(f"not finite: {', '.join(bad)}")
    if run.summary.get("outcome") != "finished":
        problems.append(f"outcome {run.summary.get('outcome')!r}")
    if run.summary.get("decoding") != "static":
        problems.append(f"decoding {run.summary.get('decoding')!r}, not the static KV cache")
    if device.startswith("cuda"):
        if f"device={device}" not in stderr:
            problems.append(f"the run did not say device={device}")
        if GRAPH_FALLBACK in stderr or "+ CUDA graph" not in stderr:
            problems.append("decoded without its CUDA graph")
    return problems


def training_checks(runner: Runner, jobs: int, tmp: Path) -> list[Check]:
    """Phase 1: the tiny preset's runs, ``jobs`` at a time; PPO with --reward_model once the reward model is there."""
    pairs = ["--pairs_dir", str(tmp / "pairs")]
    ppo = [*STEPS, "--train_batch_size", "16", "--ppo_epochs", "2"]
    grpo, token = [*STEPS, "--train_batch_size", "8"], ["--level", "token"]
    sort = ["--task", "sort", "--warmup_steps", "2", "--grpo_group_size", "4"]
    clip_higher = ["--grpo_clip_range_high", "0.28"]
    reward_model = "train_reward_model.py"
    runs = {  # name: (script, flags, tags metrics.csv must have)
        reward_model: (
            "train_reward_model.py",
            [*STEPS, *pairs, "--train_batch_size", "8", "--pair_prompts", "48", "--heldout_pairs", "8"]
            + ["--normalization_samples", "16"],
            ("loss", "accuracy", "eval_accuracy"),
        ),
        "train_dpo.py": (
            "train_dpo.py",
            [*STEPS, *pairs, "--train_batch_size", "8", "--pair_prompts", "32"],
            ("loss/policy",),
        ),
        "train_ppo.py": ("train_ppo.py", ppo, ("reward/mean", "kl/ref")),
        "train_ppo.py --level token": ("train_ppo.py", [*token, *ppo], ("kl/ref",)),
        "train_grpo.py": ("train_grpo.py", grpo, ("reward/mean", "kl/ref")),
        "train_grpo.py --level token": ("train_grpo.py", [*token, *grpo], ("kl/ref", "ppo/clip_frac")),
        "grpo token: rloo, cispo": (
            "train_grpo.py",
            [*token, *grpo, "--advantage", "rloo", "--loss_type", "cispo", *clip_higher],
            ("clip_ratio/high_mean",),
        ),
        "grpo token: gspo, dr_grpo, clip-higher": (
            "train_grpo.py",
            [*token, *grpo, "--importance_sampling_level", "sequence", "--advantage", "dr_grpo", *clip_higher],
            ("clip_ratio/region_mean",),
        ),
        "grpo token sort: dynamic sampling, dapo, clip-higher": (
            "train_grpo.py",
            [*token, *grpo, *sort, "--dynamic_sampling", "--loss_type", "dapo", *clip_higher],
            ("accuracy/heldout", "dynamic_sampling/gen_batches"),
        ),
    }
    learned = runner.folder(reward_model) / "reward_model"
    with ThreadPoolExecutor(jobs) as pool:
        futures = {name: pool.submit(runner.run, name, *run) for name, run in runs.items()}  # in this order
        stand_in = stand_in_reward_model(tmp / "stand-in")
        ppo_name, ensemble_name = (
            "train_ppo.py --reward_model",
            "train_grpo.py --reward_model A,B --reward_ensemble uwo",
        )
        if not (futures[reward_model].result().ok and (learned / "reward_model.json").is_file()):
            learned, failed = stand_in, " (on a stand-in: train_reward_model.py failed)"  # the two paths fail apart
            ppo_name, ensemble_name = ppo_name + failed, ensemble_name + failed
        ensemble = [*grpo, "--reward_model", f"{learned},{stand_in}", "--reward_ensemble", "uwo"]
        futures[ppo_name] = pool.submit(
            runner.run, ppo_name, "train_ppo.py", [*ppo, "--reward_model", str(learned)], ("reward/gold",)
        )
        futures[ensemble_name] = pool.submit(runner.run, ensemble_name, "train_grpo.py", ensemble, ("reward/gold",))
        return [future.result() for future in futures.values()]


def stand_in_reward_model(folder: Path) -> Path:
    """A reward-model folder as train_reward_model.py writes it, untrained: the tiny policy's transformer with
    a new one-label score head, its tokenizer, and a reward_model.json that leaves the score as it is. The head
    is drawn from a private generator: on CUDA this runs beside the checks that compare random streams."""
    from transformers import GPT2ForSequenceClassification
    from transformers.utils import logging as hf_logging

    from rlhf_practice.modeling import TINY_MODEL_DIR, load_tokenizer

    tokenizer = load_tokenizer("tiny")
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the new head's "newly initialized" report
    try:
        with _LOADING:
            model = GPT2ForSequenceClassification.from_pretrained(
                TINY_MODEL_DIR, num_labels=1, pad_token_id=tokenizer.pad_token_id
            )
    finally:
        hf_logging.set_verbosity(verbosity)
    with torch.no_grad():
        model.score.weight.normal_(0, 0.02, generator=torch.Generator().manual_seed(0))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "reward_model.json").write_text(json.dumps({"task": "sentiment", "score_mean": 0.0, "score_std": 1.0}))
    return folder


# ----------------------------------------------------------------------------- the decoder against generate


def _prompts(tokenizer: object, texts: list[str], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    return batch["input_ids"].to(device), batch["attention_mask"].to(device)


def _sample(policy: object, tokenizer: object, ids: torch.Tensor, mask: torch.Tensor, decoding: str, **settings):
    """(generation, the decoder or None, torch.rand(3) drawn right after) under seed 3, as the CPU tests seed it."""
    from rlhf_practice.sampling import Sampler

    torch.manual_seed(3)
    sampler = Sampler(policy, tokenizer, decoding=decoding, **{"max_new_tokens": 12, **settings})
    generation = sampler.sample(ids, mask)
    return generation, sampler.decoder, torch.rand(3, device=ids.device)


def _first_difference(a: torch.Tensor, b: torch.Tensor) -> str:
    """Where two id tensors first differ: "row r, column c (x vs y)" or "shapes (..) vs (..)"."""
    if a.shape != b.shape:
        return f"shapes {tuple(a.shape)} vs {tuple(b.shape)}"
    row, column = (a != b).nonzero()[0].tolist()
    return f"row {row}, column {column} ({a[row, column].item()} vs {b[row, column].item()})"


def _graph_problem(decoder: object, device: torch.device) -> str | None:
    """None if the static decoder ran as it should here: with a recorded CUDA graph on CUDA."""
    if decoder is None:
        return "the static path was not taken"
    if device.type == "cuda" and not (decoder.use_cuda_graph and decoder.capture_seconds > 0):
        return "decoded eagerly: the CUDA graph was not recorded"
    return None


def same_tokens(policy: object, tokenizer: object, cases: dict[str, tuple[torch.Tensor, torch.Tensor, dict]]) -> Result:
    """float32: for each case (ids, mask, settings) the static decoder and ``generate`` sample the same
    tokens and masks, leave the generator alike, and score the same log-probs."""
    failures, rows, tokens = [], 0, 0
    for case, (ids, mask, settings) in cases.items():
        hf, _, hf_after = _sample(policy, tokenizer, ids, mask, "hf", **settings)
        static, decoder, static_after = _sample(policy, tokenizer, ids, mask, "static", **settings)
        problem = _graph_problem(decoder, ids.device)
        if problem is None and not torch.equal(hf.sequences, static.sequences):
            problem = "tokens differ at " + _first_difference(hf.sequences, static.sequences)
            problem += _logit_gap(policy, tokenizer, ids, mask, hf.sequences, static.sequences, settings)
        elif problem is None and not torch.equal(hf.response_mask, static.response_mask):
            problem = "response masks differ"
        elif problem is None and not torch.equal(hf_after, static_after):
            problem = "the random stream after sampling differs"
        if problem is None:
            with torch.no_grad():
                gap = (policy.evaluate_sequences(hf).logprobs - policy.evaluate_sequences(static).logprobs).abs().max()
            problem = f"scored log-probs differ by {gap.item():.2g}" if gap > FP32_TOLERANCE else None
        if problem:
            failures.append(f"{case}: {problem}")
        rows, tokens = rows + len(ids), tokens + static.response_mask.sum().item()
    figure = f"{len(cases) - len(failures)}/{len(cases)} cases identical ({rows} rows, {tokens:.0f} reply tokens)"
    return not failures, figure + ("; " + "; ".join(failures) if failures else "")


def _logit_gap(
    policy: object,
    tokenizer: object,
    ids: torch.Tensor,
    mask: torch.Tensor,
    ours: torch.Tensor,
    theirs: torch.Tensor,
    settings: dict,
) -> str:
    """Where two samplings first part, how far apart the two paths' logits were (the same prefix, so they
    should agree to float rounding: a tie broken by rounding, or a real difference?). Samples both again."""
    from rlhf_practice.sampling import Sampler

    width = min(ours.shape[1], theirs.shape[1])
    row, column = (ours[:, :width] != theirs[:, :width]).nonzero()[0].tolist()
    step = column - ids.shape[1]
    with recorded_logits() as seen:
        _sample(policy, tokenizer, ids, mask, "static", **settings)
    config = Sampler(policy, tokenizer, decoding="hf", **{"max_new_tokens": 12, **settings}).generation_config
    config.return_dict_in_generate = config.output_logits = True  # the raw logits of every step
    torch.manual_seed(3)
    with policy.autocast():
        out = policy.lm.generate(input_ids=ids, attention_mask=mask, generation_config=config)
    if step >= min(len(seen), len(out.logits)):
        return ""
    gap = (seen[step][row] - out.logits[step][row].float()).abs().max().item()
    return f" (their logits there differ by at most {gap:.2g})"


def bf16_tokens(policy: object, tokenizer: object, ids: torch.Tensor, mask: torch.Tensor) -> Result:
    """bfloat16 (not promised to match): the share of replies, and of first tokens, the two paths sample
    alike; it fails only if the static path did not run as it should (the log-probs check measures it)."""
    same, first, total, problem = 0, 0, 0, None
    for settings in SAMPLING.values():
        hf, _, _ = _sample(policy, tokenizer, ids, mask, "hf", **settings)
        static, decoder, _ = _sample(policy, tokenizer, ids, mask, "static", **settings)
        problem = problem or _graph_problem(decoder, ids.device)
        width = min(hf.sequences.shape[1], static.sequences.shape[1])
        rows_alike = (hf.sequences[:, :width] == static.sequences[:, :width]).all(dim=1)
        rows_alike &= hf.response_mask.sum(1) == static.response_mask.sum(1)
        column = ids.shape[1]  # the first reply token
        same, total = same + int(rows_alike.sum()), total + len(ids)
        first += int((hf.sequences[:, column] == static.sequences[:, column]).sum())
    figure = (
        f"{same}/{total} replies, {first}/{total} first tokens identical over {len(SAMPLING)} settings (not promised)"
    )
    return problem is None, figure + (f"; {problem}" if problem else "")


@contextmanager
def recorded_logits() -> Iterator[list[torch.Tensor]]:
    """The float32 logits (B, V) the static decoder hands to ``sample_next_token``, one per new token."""
    from rlhf_practice import sampling

    seen: list[torch.Tensor] = []
    original = sampling.sample_next_token

    def record(logits: torch.Tensor, *args: object) -> torch.Tensor:
        seen.append(logits.clone())
        return original(logits, *args)

    sampling.sample_next_token = record
    try:
        yield seen
    finally:
        sampling.sample_next_token = original


def logprob_gaps(policy: object, tokenizer: object, ids: torch.Tensor, mask: torch.Tensor, temperature: float):
    """Per reply token, |log p| gaps against one plain float32 forward of the whole sequence: (the decoder's
    distribution, the scoring pass's), each (max, mean) over real reply tokens, in nats."""
    import torch.nn.functional as F

    from rlhf_practice.modeling import position_ids_from_mask

    with recorded_logits() as seen:
        generation, decoder, _ = _sample(policy, tokenizer, ids, mask, "static", temperature=temperature)
    problem = _graph_problem(decoder, ids.device)
    if problem:
        raise RuntimeError(problem)
    replies = generation.response_ids.unsqueeze(-1)  # (B, T, 1)
    real = generation.response_mask > 0  # (B, T)
    with torch.no_grad():
        logits = policy.lm(
            input_ids=generation.sequences,
            attention_mask=generation.attention_mask,
            position_ids=position_ids_from_mask(generation.attention_mask),
        ).logits.float()  # (B, L, V), float32 weights and no autocast
        plain = F.log_softmax(logits[:, generation.prompt_length - 1 : -1] / temperature, -1).gather(-1, replies)
        decoded = F.log_softmax(torch.stack(seen, 1) / temperature, -1).gather(-1, replies)  # (B, T, 1)
        scored = policy.evaluate_tokens(generation).logprobs  # (B, T)
    gaps = []
    for ours in (decoded.squeeze(-1), scored):
        gap = (ours - plain.squeeze(-1)).abs()[real]
        gaps.append((gap.max().item(), gap.mean().item()))
    return gaps


def logprobs_exact(policy: object, tokenizer: object, ids: torch.Tensor, mask: torch.Tensor) -> Result:
    """The sampled distribution and the scoring pass against a plain forward, at each of :data:`TEMPERATURES`."""
    bf16 = policy.bf16
    worst_max = [0.0, 0.0]
    worst_mean = [0.0, 0.0]
    for temperature in TEMPERATURES:
        for i, (gap_max, gap_mean) in enumerate(logprob_gaps(policy, tokenizer, ids, mask, temperature)):
            worst_max[i], worst_mean[i] = max(worst_max[i], gap_max), max(worst_mean[i], gap_mean)
    if bf16:
        ok = max(worst_max) <= BF16_MAX_TOLERANCE and max(worst_mean) <= BF16_MEAN_TOLERANCE
        bound = f"bounds max {BF16_MAX_TOLERANCE}, mean {BF16_MEAN_TOLERANCE}"
    else:
        ok, bound = max(worst_max) <= FP32_TOLERANCE, f"bound {FP32_TOLERANCE:g}"
    sampler, scoring = (f"{worst_max[i]:.2g} ({worst_mean[i]:.2g})" for i in (0, 1))
    figure = f"T=0.5/1/1.7, |log p - plain forward| per token, max (mean): sampler {sampler}, scoring {scoring} nats"
    figure += f"; {bound}"
    return ok and all(map(math.isfinite, worst_max + worst_mean)), figure


def decoding_checks(device: torch.device) -> list[Check]:
    """Phase 2, in this process, on the tiny model: float32 tokens, log-probs, then the same in bfloat16."""
    from rlhf_practice.modeling import PolicyValueModel, load_tokenizer

    tokenizer = load_tokenizer("tiny")
    with _LOADING:  # the training phase's stand-in reward model loads in another thread meanwhile
        policy = PolicyValueModel.from_pretrained("tiny", device, mixed_precision=False)
    ids, mask = _prompts(tokenizer, PROMPTS * 3, device)  # 24 rows, repeated prompts: the shared prefill
    groups = [p for p in PROMPTS for _ in range(4)]  # a GRPO step's rows: each prompt 4 times in a row
    cases = {name: (ids, mask, settings) for name, settings in SAMPLING.items()}
    cases["greedy (top_k=1)"] = (ids, mask, {"top_k": 1})
    cases["groups of 4"] = (*_prompts(tokenizer, groups, device), {})
    cases["width 3"] = (*_prompts(tokenizer, ["The plot is"], device), {"max_new_tokens": 6})
    cases["width 8"] = (*_prompts(tokenizer, ["The acting is really wonderful. 9 out"], device), {})
    cases["width 10"] = (*_prompts(tokenizer, ["I watched this film last week with my kids and", "Great"], device), {})
    checks = [
        _guarded("fp32: static+graph = generate", lambda: same_tokens(policy, tokenizer, cases)),
        _guarded("fp32: sampled log-probs exact", lambda: logprobs_exact(policy, tokenizer, ids, mask)),
    ]
    if device.type == "cuda":
        policy.bf16 = True  # what mixed_precision (on by default) gives every preset on CUDA
        checks.append(_guarded("bf16: static+graph vs generate", lambda: bf16_tokens(policy, tokenizer, ids, mask)))
        checks.append(_guarded("bf16: sampled log-probs", lambda: logprobs_exact(policy, tokenizer, ids, mask)))
    else:
        checks.append(_PROGRESS.ended(Check("bf16", True, "skipped: bfloat16 autocast runs on CUDA only (dry run)")))
    return checks


def _guarded(name: str, check: Callable[[], Result]) -> Check:
    """The check ``name`` from ``check()``'s (ok, figure), its seconds after the figure; an exception fails it."""
    _say(f"start {name}")
    start = time.monotonic()
    detail = ""
    try:
        ok, figure = check()
    except Exception as err:  # a broken path must not hide the other checks
        import traceback

        ok, figure = False, f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        detail = traceback.format_exc()
    return _PROGRESS.ended(Check(name, ok, f"{figure} [{time.monotonic() - start:.0f} s]", detail))


# ----------------------------------------------------------------------------- the GPT-2-124M shape


def _timed_ms_per_token(sampler: object, ids: torch.Tensor, mask: torch.Tensor, repeats: int) -> tuple[float, int]:
    """Median milliseconds per new token of ``sampler.sample`` after one warm-up call (which records the
    CUDA graph), every call under seed 0; and the tokens each call produced."""

    def once() -> tuple[float, int]:
        torch.manual_seed(0)
        _synchronize(ids.device)
        start = time.perf_counter()
        generation = sampler.sample(ids, mask)
        _synchronize(ids.device)
        return time.perf_counter() - start, generation.response_ids.shape[1]

    once()
    times, tokens = zip(*(once() for _ in range(repeats)))
    return 1000 * statistics.median(times) / tokens[0], tokens[0]


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def gpt2_shape_decoding_checks(model_dir: Path, device: torch.device) -> list[Check]:
    """float32 tokens of the static decoder against generate, and decode ms per token in bfloat16, on
    16 prompts x 4 (the gpt2 preset's GRPO rows) with 24 new tokens (8 rows, 6 tokens on a CPU)."""
    from rlhf_practice.modeling import PolicyValueModel, load_tokenizer
    from rlhf_practice.sampling import Sampler

    tokenizer = load_tokenizer(str(model_dir))
    policy = PolicyValueModel.from_pretrained(str(model_dir), device, mixed_precision=False)
    on_cuda = device.type == "cuda"
    prompts, group, new_tokens = (PROMPTS * 2, 4, 24) if on_cuda else (PROMPTS[:4], 2, 6)
    ids, mask = _prompts(tokenizer, [p for p in prompts for _ in range(group)], device)
    cases = {"T=1": (ids, mask, {"max_new_tokens": new_tokens})}
    checks = [_guarded("gpt2 shape fp32: static+graph = generate", lambda: same_tokens(policy, tokenizer, cases))]

    def timing() -> Result:
        policy.bf16 = on_cuda  # the gpt2 preset's precision on CUDA
        figures, problem = {}, None
        if on_cuda:
            torch.cuda.reset_peak_memory_stats(device)
        for path in ("static+graph", "static eager", "generate"):
            if path == "static+graph" and not on_cuda:
                continue
            sampler = Sampler(
                policy, tokenizer, max_new_tokens=new_tokens, decoding="hf" if path == "generate" else "static"
            )
            if path == "static eager":
                sampler.decoder.use_cuda_graph = False
            figures[path], tokens = _timed_ms_per_token(sampler, ids, mask, repeats=3 if on_cuda else 1)
            if path == "static+graph":
                problem = _graph_problem(sampler.decoder, device)
        peak = f", peak {torch.cuda.max_memory_allocated(device) / 2**20:,.0f} MB" if on_cuda else ""
        shown = ", ".join(f"{path} {ms:.2f}" for path, ms in figures.items())
        figure = f"{shown} ms/token ({len(ids)} rows x {tokens} tokens, {'bf16' if on_cuda else 'fp32'}{peak})"
        return problem is None, figure + (f"; {problem}" if problem else "")

    checks.append(_guarded("gpt2 shape decode ms/token", timing))
    return checks


def gpt2_shape_training_checks(runner: Runner, model_dir: Path) -> list[Check]:
    """Phase 3, one run at a time (nothing else on the GPU): PPO, GRPO and GRPO with LoRA on the
    GPT-2-shaped model; median step time after the first step, and peak memory."""
    shapes = GPT2_SHAPE if runner.device.startswith("cuda") else GPT2_SHAPE_CPU
    model = ["--model.model_name", str(model_dir)]
    on_cuda = runner.device.startswith("cuda")

    def figure(run: object, seconds: float) -> str:
        steps = run.metrics["time/step_s"][1:] or run.metrics["time/step_s"]
        generate = run.metrics["time/generate_s"][1:] or run.metrics["time/generate_s"]
        rows = int(run.config["train_batch_size"]) * int(run.config.get("grpo_group_size", 1))
        return (
            f"step {statistics.median(steps):.3f} s (generate {statistics.median(generate):.3f} s), median of steps "
            f"2-{len(run.steps)}, {rows} replies; peak {run.summary['peak_memory_mb']:,.0f} MB "
            + ("(torch allocated)" if on_cuda else "(RSS)")
            + (f"; {run.summary['trainable_percent']:g} % of weights train" if "lora" in run.summary else "")
            + f"; {seconds:.0f} s"
        )

    return [
        runner.run(name, script, flags, figure=figure)
        for name, script, flags in (
            ("gpt2 shape ppo", "train_ppo.py", [*model, *shapes["ppo"]]),
            ("gpt2 shape grpo", "train_grpo.py", [*model, *shapes["grpo"]]),
            ("gpt2 shape grpo lora r=8", "train_grpo.py", [*model, *shapes["grpo"], "--lora_r", "8"]),
        )
    ]


# ----------------------------------------------------------------------------- main


def _phase(name: str, checks: Callable[..., list[Check]], *args: object) -> list[Check]:
    """``checks(*args)``; an exception outside any one check (building a model, say) is one failed check."""
    try:
        return checks(*args)
    except Exception as err:
        import traceback

        first_line = str(err).splitlines()[0] if str(err) else ""
        return [_PROGRESS.ended(Check(name, False, f"{type(err).__name__}: {first_line}", traceback.format_exc()))]


_PRINT = threading.Lock()
_LOADING = threading.Lock()  # transformers' from_pretrained builds on the meta device, which is not thread-safe
_START = time.monotonic()


@dataclass
class _Progress:
    """The checks ended so far, written to ``out`` after each one: a run cut short still leaves its rows."""

    out: Path | None = None
    checks: list[Check] = field(default_factory=list)

    def ended(self, check: Check) -> Check:
        with _PRINT:
            self.checks.append(check)
            if self.out:
                self.out.write_text(report(self.checks, time.monotonic() - _START))
        _say(f"{'ok  ' if check.ok else 'FAIL'} {check.name}: {check.figure}")
        return check


_PROGRESS = _Progress()


def _say(text: str) -> None:
    with _PRINT:
        print(f"[{time.monotonic() - _START:5.0f} s] {text}", file=sys.stderr, flush=True)


def _tail(text: str | bytes | None, lines: int = 30) -> str:
    """The last ``lines`` non-empty lines of a process's output (progress bars' carriage returns as new lines)."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    kept = [line.strip() for line in (text or "").replace("\r", "\n").splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


def default_impl() -> str:
    """The answer key where this copy has one (the instructor's), else $RLHF_IMPL or "student"."""
    from rlhf_practice.course import ANSWER_DIR, has_answer_key

    return ANSWER_DIR.name if has_answer_key() else os.environ.get("RLHF_IMPL", "student")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="also write the table to this file, each failure's output after it")
    parser.add_argument(
        "--impl",
        default=None,
        help="whose rl/ functions the training runs use, as the scripts' flag (default: the answer key where this "
        'copy has one, else $RLHF_IMPL or "student")',
    )
    parser.add_argument(
        "--jobs", type=int, default=None, help="training runs of phase 1 at a time (default: 4 on CUDA)"
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=420,
        help="seconds; a training run that would start later is reported as not run (default 420)",
    )
    parser.add_argument(
        "--device",
        default="cuda",
        help='testing only: "cpu" runs the same checks on the CPU as a dry run (no CUDA graph, no bfloat16, '
        "the GPT-2-shaped work cut to a few rows); the default is cuda",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        line = (
            f"gpu_check: no CUDA device here (torch {torch.__version__}: torch.cuda.is_available() is False); "
            "run it on a machine with a GPU."
        )
        print(line, file=sys.stderr)
        if args.out:
            args.out.write_text(line + "\n")
        return NO_CUDA_EXIT
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # loading and saving bars would bury the progress lines
    device = torch.device(args.device)
    on_cuda = device.type == "cuda"
    jobs = args.jobs or (4 if on_cuda else 1)
    impl = args.impl or default_impl()
    checks: list[Check] = []
    _PROGRESS.out = args.out
    if on_cuda:
        name = torch.cuda.get_device_name(device)
        _say(f"{name}, torch {torch.__version__}, CUDA {torch.version.cuda}, impl {impl}")
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as folder:
        tmp = Path(folder)
        threads = max(1, (os.cpu_count() or 1) // jobs) if on_cuda else 1
        runner = Runner(args.device, impl, tmp / "runs", _START + args.deadline, threads)
        with ThreadPoolExecutor(1) as background:  # on CUDA phase 1 runs while this process checks the decoder
            phase1 = background.submit(_phase, "training runs", training_checks, runner, jobs, tmp) if on_cuda else None
            if not on_cuda:
                checks += _phase("training runs", training_checks, runner, jobs, tmp)
            checks += _phase("decoding checks", decoding_checks, device)
            if phase1 is not None:
                checks[:0] = phase1.result()
        from benchmark import build_gpt2_shape

        model_dir = tmp / "gpt2-shape"
        checks += _phase("gpt2 shape decoding", lambda: gpt2_shape_decoding_checks(build_gpt2_shape(model_dir), device))
        if on_cuda:
            torch.cuda.empty_cache()
        runner.threads = (os.cpu_count() or 1) if on_cuda else 1
        if (model_dir / "config.json").is_file():
            checks += _phase("gpt2 shape training", gpt2_shape_training_checks, runner, model_dir)
    seconds = time.monotonic() - _START
    if args.out:  # the rows in the order of the checks (while running: in the order they ended)
        args.out.write_text(report(checks, seconds))
    print(format_table(checks, seconds), end="")
    for check in checks:
        if not check.ok and check.detail:
            print(f"\n--- {check.name}\n{check.detail}", file=sys.stderr)
    return exit_code(checks)


if __name__ == "__main__":
    sys.exit(main())
