"""Preference pairs for DPO (``train_dpo.py``, task 12) and the reward model (``train_reward_model.py``,
task 13): built from the task's reward, cached, or read from a file of your own; then tokenized into
the batches that ``reply_logps`` and ``get_reward`` read. Both scripts build the same pool of pairs
from the same settings (one cache file); the reward model then splits it (:func:`split_pairs`).

A pair is a prompt and two replies to it, ``chosen`` (preferred) and ``rejected``.

Built pairs (``--pairs_file`` empty), :func:`build_pairs`:
    ``pair_prompts`` training prompts (drawn with their own seed, :data:`PAIR_SEED_OFFSET`; sort and add
    never yield their held-out prompts) -> ``pair_samples`` replies each, sampled from the starting
    policy with the run's sampling settings -> the task's reward of each -> per prompt, ``pair_mode``
    "best_worst" (highest against lowest reward) or "all" (every two replies whose rewards differ).
    Two replies with equal rewards are a tie and never make a pair.

Cache, :func:`cached_pairs`: ``pairs_dir``/<task>-<hash>.jsonl, one pair per line (``prompt``,
``chosen``, ``rejected``, ``chosen_reward``, ``rejected_reward``, ``chosen_ended``, ``rejected_ended``),
and <task>-<hash>.json beside it: the command that built it, every setting the pairs depend on
(:func:`pair_settings`; the hash is theirs), the counts and the seconds it took. A later run with the
same settings reads the file instead of sampling again.

Your own file (``--pairs_file``), :func:`load_pairs`: ``.jsonl`` (one object per line), ``.json`` (a
list of objects) or ``.csv`` (a header row), with the string columns ``prompt``, ``chosen`` and
``rejected``: TRL's explicit-prompt preference format. Other columns are ignored.

End of text. A sampled reply either ended by itself (it sampled the end-of-text token) or was cut at
``max_new_tokens``. Its log-prob must be that of what the policy produced: an ended reply enters with
its end-of-text token, a cut one without any (appending one would score a token never sampled, and
teach the policy to stop where the sampler merely ran out of room). ``*_ended`` records which. A file
without ``*_ended`` columns (yours, in TRL's format) holds finished replies: each gets end-of-text, as
TRL appends it to every reply.
"""

from __future__ import annotations

import csv
import hashlib
import json
import shlex
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import torch
from torch import nn

from rlhf_practice.config import PAIRS_SUFFIXES, PairsConfig
from rlhf_practice.errors import ConfigError, DataError
from rlhf_practice.tracking import check_finite

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from rlhf_practice.modeling import Generation
    from rlhf_practice.training import TrainingRun

COLUMNS = ("prompt", "chosen", "rejected")
PAIR_SEED_OFFSET = 2**33
"""Pair prompts are drawn with seed + this: not the prompts the evaluations sample (seed), nor the
warm-up's (seed + 2**32)."""
BUILD_PROMPTS_PER_CALL = 64
"""Prompts per sampling call while building (each repeated ``pair_samples`` times)."""


def pair_settings(config: PairsConfig) -> dict:
    """Every setting the built pairs depend on: the task and its prompts, the starting policy (for
    sort and add: the seed that draws its weights and the warm-up), the reward, the sampling, the
    seed and the pair settings. Device and decoding path change only float rounding and are left out.
    What the reward model does with the pool afterwards (``heldout_pairs``, ``num_pairs``,
    ``label_noise``: :func:`split_pairs`) is not here: train_dpo.py and train_reward_model.py with the
    same settings share one file, so both can learn from the same pairs."""
    settings = {
        "task": config.task,
        "model": config.model.model_name,
        "max_new_tokens": config.max_new_tokens,
        "temperature": config.temperature,
        "top_k": config.top_k,
        "top_p": config.top_p,
        "seed": config.seed,
        "pair_prompts": config.pair_prompts,
        "pair_samples": config.pair_samples,
        "pair_mode": config.pair_mode,
    }
    if config.task == "sentiment":
        settings["data"] = vars(config.data).copy()
        settings["reward"] = vars(config.reward).copy()
    else:
        settings["warmup_steps"] = config.warmup_steps
        settings["warmup_learning_rate"] = config.warmup_learning_rate
    return settings


def rank_pairs(prompt: str, replies: list[str], rewards: list[float], ended: list[bool], mode: str) -> list[dict]:
    """The pairs of one prompt's replies: "best_worst" one (the first highest against the first lowest
    reward), "all" one for every two replies whose rewards differ (higher reward chosen). Ties make no pair."""
    if mode == "best_worst":
        best = max(range(len(rewards)), key=rewards.__getitem__)
        worst = min(range(len(rewards)), key=rewards.__getitem__)
        candidates = [(best, worst)]
    else:
        candidates = [(i, j) if rewards[i] > rewards[j] else (j, i) for i in range(len(rewards)) for j in range(i)]
    return [
        {
            "prompt": prompt,
            "chosen": replies[c],
            "rejected": replies[r],
            "chosen_reward": rewards[c],
            "rejected_reward": rewards[r],
            "chosen_ended": ended[c],
            "rejected_ended": ended[r],
        }
        for c, r in candidates
        if rewards[c] != rewards[r]
    ]


@torch.no_grad()
def build_pairs(run: TrainingRun, seed: int) -> tuple[list[dict], int]:
    """Sample ``pair_samples`` replies from ``run.policy`` to each of ``pair_prompts`` training prompts
    (drawn with ``seed``), score them with the task's reward and rank them (:func:`rank_pairs`).
    Returns (pairs, prompts whose replies all tied).

    The replies are sampled from torch's random numbers seeded with ``seed`` and the run's own random
    state is put back afterwards, so that training goes the same way whether the pairs were built now
    or read from the cache."""
    devices = [run.device] if run.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        return _sample_and_rank(run, seed)


def _sample_and_rank(run: TrainingRun, seed: int) -> tuple[list[dict], int]:
    config: PairsConfig = run.config
    prompt_batches = run.task.prompt_batches(run.tokenizer, BUILD_PROMPTS_PER_CALL, seed)
    return sample_pairs(
        run.generate, run.score_replies, prompt_batches, config.pair_prompts, config.pair_samples, config.pair_mode,
        run.tokenizer.eos_token_id, run.device,
    )  # fmt: skip


def sample_pairs(
    generate: Callable[[torch.Tensor, torch.Tensor], Generation],
    score: Callable[[Generation, list[str]], tuple[list[str], torch.Tensor]],
    prompt_batches: Iterator[dict],
    prompts: int,
    k: int,
    mode: str,
    eos_token_id: int,
    device: torch.device,
) -> tuple[list[dict], int]:
    """``k`` replies to each of the first ``prompts`` prompts of ``prompt_batches``, sampled with ``generate``
    (one call per batch, its rows on ``device``), scored with ``score`` (the replies' texts and rewards) and
    ranked (:func:`rank_pairs` with ``mode``). Returns (pairs, prompts whose replies all tied). The pairs of
    train_dpo.py and train_reward_model.py (:func:`build_pairs`), and those the gates' judge draws to measure
    a saved reward model."""
    pairs, ties, done = [], 0, 0
    while done < prompts:
        batch = next(prompt_batches)
        n = min(len(batch["prompt_text"]), prompts - done)
        input_ids = batch["input_ids"][:n].to(device).repeat_interleave(k, dim=0)  # (n * K, P)
        attention_mask = batch["attention_mask"][:n].to(device).repeat_interleave(k, dim=0)
        texts = [p for p in batch["prompt_text"][:n] for _ in range(k)]
        generation = generate(input_ids, attention_mask)
        replies, rewards = score(generation, texts)
        ended = (generation.response_ids == eos_token_id) & (generation.response_mask > 0)
        ended, rewards = ended.any(dim=1).tolist(), rewards.tolist()
        for i in range(0, n * k, k):
            found = rank_pairs(texts[i], replies[i : i + k], rewards[i : i + k], ended[i : i + k], mode)
            pairs += found
            ties += not found
        done += n
    return pairs, ties


def cached_pairs(run: TrainingRun) -> tuple[list[dict], Path]:
    """The pairs :func:`build_pairs` makes for ``run.config``: read from ``pairs_dir`` if a file was built
    with the same settings, else built (from the starting policy), written there and returned.
    Prints where they are (train_dpo.py then prints how long it took, the seconds summary.json's
    ``pairs_s`` records)."""
    config: PairsConfig = run.config
    settings = pair_settings(config)
    key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]
    path = Path(config.pairs_dir) / f"{config.task}-{key}.jsonl"
    sidecar = path.with_suffix(".json")
    if path.is_file() and sidecar.is_file():
        record = json.loads(sidecar.read_text())
        if record.get("settings") == settings:
            pairs = read_pairs(path, "pairs_dir")
            print(f"pairs: {len(pairs)} read from {path} (built by: {record.get('command', '?')})", file=sys.stderr)
            return pairs, path
    start = time.perf_counter()
    pairs, ties = build_pairs(run, config.seed + PAIR_SEED_OFFSET)
    seconds = time.perf_counter() - start
    if not pairs:
        raise DataError(
            f"pair_prompts={config.pair_prompts}: every prompt's {config.pair_samples} replies got the same reward, "
            "so no pair is left after dropping ties; raise pair_samples or pair_prompts."
        )
    write_pairs(path, pairs)
    record = {
        "command": shlex.join(["python", *sys.argv]),
        "settings": settings,
        "pairs": len(pairs),
        "prompts": config.pair_prompts,
        "prompts_all_tied": ties,
        "build_s": round(seconds, 2),
    }
    partial = sidecar.with_name(f".{sidecar.name}.partial")  # atomic: a concurrent run reads all of it or none
    partial.write_text(json.dumps(record, indent=2) + "\n")
    partial.replace(sidecar)
    print(
        f"pairs: built {len(pairs)} from {config.pair_prompts} prompts x {config.pair_samples} replies "
        f"({ties} prompts all tied); saved to {path}",
        file=sys.stderr,
    )
    return pairs, path


def write_pairs(path: Path, pairs: list[dict]) -> None:
    """Write ``pairs`` to ``path`` as jsonl, atomically (a partial file never has the name)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    with open(partial, "w", encoding="utf-8") as f:
        for pair in pairs:
            f.write(json.dumps(pair, ensure_ascii=False) + "\n")
    partial.replace(path)


def read_pairs(path: Path, setting: str) -> list[dict]:
    """The rows of a pairs file (.jsonl, .json or .csv), each with the string columns prompt, chosen and
    rejected; ``chosen_ended``/``rejected_ended`` become booleans (True where absent). Every problem is a
    one-line :class:`DataError` naming ``setting``."""
    where = f"{setting}={str(path)!r}"
    suffix = path.suffix.lower()
    if suffix not in PAIRS_SUFFIXES:
        raise DataError(f"{where}: unknown file type {suffix!r}; use one of {', '.join(PAIRS_SUFFIXES)}.")
    if not path.is_file():
        raise DataError(f"{where}: no such file; check the path (or leave {setting} empty to build pairs).")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise DataError(f"{where}: the file is not UTF-8 text; save it as UTF-8.") from err
    rows = _parse(text, suffix, where)
    if not rows:
        raise DataError(f"{where}: the file holds no pairs; it needs one row per pair with {', '.join(COLUMNS)}.")
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise DataError(f"{where}: row {number} is not an object with {', '.join(COLUMNS)}.")
        missing = [c for c in COLUMNS if c not in row]
        if missing:
            raise DataError(
                f"{where}: row {number} has no column {missing[0]!r} (it has: {', '.join(map(str, row)) or 'none'}); "
                f"each pair needs {', '.join(COLUMNS)}."
            )
        bad = next((c for c in COLUMNS if not isinstance(row[c], str)), None)
        if bad is not None:
            raise DataError(f"{where}: row {number}: {bad} is {type(row[bad]).__name__}, not text.")
        if not row["prompt"]:
            raise DataError(f"{where}: row {number} has an empty prompt; a reply needs a prompt to follow.")
        for side in ("chosen", "rejected"):
            row[f"{side}_ended"] = _as_bool(row.get(f"{side}_ended", True))
    return rows


def _parse(text: str, suffix: str, where: str) -> list:
    if suffix == ".csv":
        return list(csv.DictReader(text.splitlines()))
    if suffix == ".json":
        try:
            data = json.loads(text) if text.strip() else []
        except json.JSONDecodeError as err:
            raise DataError(f"{where}: not valid JSON (line {err.lineno}: {err.msg}).") from err
        if not isinstance(data, list):
            raise DataError(f"{where}: a .json pairs file must hold a list of objects (one per pair).")
        return data
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise DataError(f"{where}: line {number} is not valid JSON ({err.msg}).") from err
    return rows


def _as_bool(value: object) -> bool:
    return value.strip().lower() in ("true", "1", "yes") if isinstance(value, str) else bool(value)


def load_pairs(config: PairsConfig) -> tuple[list[dict], Path]:
    """The pairs of ``config.pairs_file`` (see the module docstring)."""
    path = Path(config.pairs_file).expanduser()
    pairs = read_pairs(path, "pairs_file")
    print(f"pairs: {len(pairs)} read from {path}", file=sys.stderr)
    return pairs, path


@dataclass
class PairBatch:
    """A batch of n pairs as ``reply_logps`` reads it: 2n rows, the n chosen replies then the n rejected
    ones, each row flush left (prompt, reply, right padding).

    input_ids:      LongTensor (2n, S)
    attention_mask: LongTensor (2n, S)  1 on prompt and reply tokens (end-of-text included), 0 on padding
    prompt_lengths: LongTensor (2n,)    the prompt's tokens in each row; its reply starts there
    ref_logps:      FloatTensor (2n,)   log pi_ref of each row's reply, once :meth:`PairData.compute_reference`
                                        has run (None before)
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    prompt_lengths: torch.Tensor
    ref_logps: torch.Tensor | None = None

    def to(self, device: torch.device) -> PairBatch:
        ref_logps = None if self.ref_logps is None else self.ref_logps.to(device)
        return PairBatch(
            self.input_ids.to(device), self.attention_mask.to(device), self.prompt_lengths.to(device), ref_logps
        )


class PairData:
    """The pairs, tokenized once: prompt and reply separately (as TRL does), the reply followed by
    end-of-text where it ended. Pairs that do not fit ``max_length`` positions are left out, with a note.
    :meth:`compute_reference` adds the reference log-probs of every pair, which its batches then carry."""

    def __init__(self, pairs: list[dict], tokenizer: PreTrainedTokenizerBase, max_length: int, source: str):
        self.pad_id = tokenizer.pad_token_id
        eos = [tokenizer.eos_token_id]
        encode = lambda text: tokenizer(text, add_special_tokens=False).input_ids  # noqa: E731
        self.rows: list[tuple[list[int], list[int], int]] = []  # (prompt + chosen, prompt + rejected, prompt length)
        for pair in pairs:
            prompt = encode(pair["prompt"])
            chosen = prompt + encode(pair["chosen"]) + eos * pair["chosen_ended"]
            rejected = prompt + encode(pair["rejected"]) + eos * pair["rejected_ended"]
            if max(len(chosen), len(rejected)) <= max_length:
                self.rows.append((chosen, rejected, len(prompt)))
        if not self.rows:
            raise DataError(
                f"{source}: no pair fits the model's {max_length} positions; shorten the prompts or replies."
            )
        if len(self.rows) < len(pairs):
            print(
                f"note: {len(pairs) - len(self.rows)} of {len(pairs)} pairs are longer than the model's "
                f"{max_length} positions and were left out.",
                file=sys.stderr,
            )
        self.ref_logps: torch.Tensor | None = None  # (len(self), 2): chosen, rejected

    def __len__(self) -> int:
        return len(self.rows)

    @torch.no_grad()
    def compute_reference(
        self,
        reference_logps: Callable,
        ref_model: nn.Module,
        batch_size: int,
        seed: int,
        process_index: int = 0,
        num_processes: int = 1,
        device: torch.device | str = "cpu",
    ) -> None:
        """log pi_ref of every pair's two replies, once: ``reference_logps(ref_model, ...)`` (train_dpo.py
        passes yours, and the reference's ``lm``). The reference never changes, so the batches of every
        step and epoch carry these numbers (``PairBatch.ref_logps``) instead of computing them again.

        It runs on the batches that :meth:`batches` yields first with the same arguments, one pass of
        them (then, under a launcher, on the pairs this process's shares left out), so each pair's
        number is computed in the very batch that first trains on it: bit for bit what computing it in
        the step gives (the loss of step 1 is log 2 exactly). A later pass batches a pair with other
        pairs, hence other padding, so a recomputation there could differ in the last bits; the cache
        does not."""
        ref = torch.full((len(self), 2), float("nan"))  # chosen, rejected
        share = batch_size // num_processes
        stream = self._index_batches(batch_size, seed, process_index, num_processes)
        first_pass = [next(stream) for _ in range(-(-len(self) // batch_size))]
        seen = {i for indices in first_pass for i in indices}
        rest = [i for i in range(len(self)) if i not in seen]
        for indices in first_pass + [rest[k : k + share] for k in range(0, len(rest), share)]:
            batch = self.collate(indices).to(device)
            # clone(): a normal tensor even if reference_logps ran under torch.inference_mode
            logps = reference_logps(ref_model, batch.input_ids, batch.attention_mask, batch.prompt_lengths).clone()
            logps = logps.float().cpu().view(2, -1).T  # (n, 2): chosen, rejected
            new = [k for k, i in enumerate(indices) if ref[i, 0].isnan()]
            ref[[indices[k] for k in new]] = logps[new]
        self.ref_logps = ref

    def collate(self, indices: list[int]) -> PairBatch:
        """The pairs ``indices`` as one :class:`PairBatch`: chosen rows first, then rejected, right-padded."""
        sequences = [self.rows[i][0] for i in indices] + [self.rows[i][1] for i in indices]
        width = max(len(s) for s in sequences)
        input_ids = torch.tensor([s + [self.pad_id] * (width - len(s)) for s in sequences], dtype=torch.long)
        attention_mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in sequences], dtype=torch.long)
        prompt_lengths = torch.tensor([self.rows[i][2] for i in indices] * 2, dtype=torch.long)
        ref_logps = None if self.ref_logps is None else self.ref_logps[indices].T.reshape(-1)  # chosen, then rejected
        return PairBatch(input_ids, attention_mask, prompt_lengths, ref_logps)

    def batches(
        self, batch_size: int, seed: int, process_index: int = 0, num_processes: int = 1
    ) -> Iterator[PairBatch]:
        """Batches of ``batch_size`` pairs forever: every pass over the pairs in a new random order
        (drawn with ``seed``); a pass shorter than a batch is topped up from the next. With
        ``num_processes`` N > 1 (which must divide ``batch_size``), process ``process_index`` gets its
        share of each batch: its batch_size / N consecutive pairs, the same stream in every process."""
        for indices in self._index_batches(batch_size, seed, process_index, num_processes):
            yield self.collate(indices)

    def _index_batches(self, batch_size: int, seed: int, process_index: int, num_processes: int) -> Iterator[list[int]]:
        """The pair indices of each batch :meth:`batches` yields."""
        generator = torch.Generator().manual_seed(seed)
        share = batch_size // num_processes
        order: list[int] = []
        while True:
            while len(order) < batch_size:
                order += torch.randperm(len(self.rows), generator=generator).tolist()
            yield order[process_index * share : (process_index + 1) * share]
            order = order[batch_size:]


def split_pairs(
    pairs: list[dict], heldout_pairs: int, num_pairs: int, label_noise: float, seed: int
) -> tuple[list[dict], list[dict]]:
    """The reward model's (training pairs, held-out pairs) from a pool of pairs, all drawn with ``seed``.

    Held out by prompt: prompts in a random order are set aside, whole, until they hold at least
    ``heldout_pairs`` pairs, so that no prompt is in both sets (a model that has seen a prompt's other
    pairs would be measured on what it memorised). Of the rest, ``num_pairs`` drawn at random are the
    training pairs (0: all of them, in the pool's order). Then ``round(label_noise * len(train))``
    training pairs, drawn at random, have chosen and rejected (and their rewards and ``*_ended``)
    swapped, as a human rater who disagrees would have labelled them; every training pair gets a
    ``label_flipped`` column. The held-out pairs keep the task's label (the gold one)."""
    generator = torch.Generator().manual_seed(seed)
    count = Counter(p["prompt"] for p in pairs)
    prompts = list(count)  # in the order of first appearance
    held: set[str] = set()
    held_count = 0
    for i in torch.randperm(len(prompts), generator=generator).tolist():
        if held_count >= heldout_pairs:
            break
        held.add(prompts[i])
        held_count += count[prompts[i]]
    train = [p for p in pairs if p["prompt"] not in held]
    heldout = [p for p in pairs if p["prompt"] in held]
    if not train:
        raise DataError(
            f"heldout_pairs={heldout_pairs}: holding out that many pairs leaves none of the {len(pairs)} to train on; "
            "lower heldout_pairs or raise pair_prompts."
        )
    if num_pairs:
        if num_pairs > len(train):
            raise DataError(
                f"num_pairs={num_pairs}: only {len(train)} training pairs are left after {len(heldout)} held-out ones; "
                "lower num_pairs (0 = all) or raise pair_prompts."
            )
        chosen = sorted(torch.randperm(len(train), generator=generator)[:num_pairs].tolist())
        train = [train[i] for i in chosen]
    flipped = set(torch.randperm(len(train), generator=generator)[: round(label_noise * len(train))].tolist())
    return [flip_label(p) if i in flipped else {**p, "label_flipped": False} for i, p in enumerate(train)], heldout


def flip_label(pair: dict) -> dict:
    """``pair`` with chosen and rejected swapped (and their ``*_reward``, ``*_ended``), marked ``label_flipped``."""
    out = {**pair, "label_flipped": True}
    for key in ("", "_reward", "_ended"):
        if f"chosen{key}" in pair or f"rejected{key}" in pair:
            out[f"chosen{key}"], out[f"rejected{key}"] = pair.get(f"rejected{key}"), pair.get(f"chosen{key}")
    return out


def flush_left(generation: Generation, pad_id: int) -> PairBatch:
    """Sampled sequences (prompt left-padded, reply right-padded) as rows laid out like a
    :class:`PairBatch`'s: flush left (the prompt's real tokens, the reply's real tokens, end-of-text
    included where the reply ended), then ``pad_id`` on the right. Rows in the generation's order."""
    width = generation.prompt_length
    prompt_mask = generation.attention_mask[:, :width].bool()
    rows, prompt_lengths = [], []
    for i in range(len(generation.sequences)):
        prompt = generation.sequences[i, :width][prompt_mask[i]]
        reply = generation.sequences[i, width:][generation.response_mask[i].bool()]
        rows.append(torch.cat([prompt, reply]))
        prompt_lengths.append(len(prompt))
    longest = max(len(r) for r in rows)
    input_ids = torch.full((len(rows), longest), pad_id, dtype=torch.long, device=generation.sequences.device)
    attention_mask = torch.zeros_like(input_ids)
    for i, row in enumerate(rows):
        input_ids[i, : len(row)] = row
        attention_mask[i, : len(row)] = 1
    return PairBatch(input_ids, attention_mask, torch.tensor(prompt_lengths, device=input_ids.device))


def reward_step(
    rm: ModuleType,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: PairBatch,
    center_rewards_coefficient: float | None,
    max_grad_norm: float,
    tag: str = "loss",
) -> dict[str, torch.Tensor]:
    """One update of a reward model on a batch of n pairs (2n rows: chosen, then rejected; see :class:`PairBatch`):
    the implementation's ``get_reward`` and ``reward_loss`` (its centring term where the coefficient is set), the
    gradient's norm clipped to ``max_grad_norm``. train_reward_model.py's step and each step of an online refresh
    (online_labels.py); a non-finite loss stops the run, named ``tag``."""
    _, scores, _ = rm.get_reward(model, batch.input_ids, batch.attention_mask, batch.prompt_lengths)  # (2n,)
    chosen, rejected = scores.chunk(2)
    loss, accuracy = rm.reward_loss(chosen, rejected, None, center_rewards_coefficient or None)
    check_finite(tag, loss)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    optimizer.step()
    return {**pair_stats(chosen.detach(), rejected.detach()), "loss": loss.detach(), "accuracy": accuracy.detach()}


def pair_stats(chosen: torch.Tensor, rejected: torch.Tensor) -> dict[str, torch.Tensor]:
    """TRL RewardTrainer's margin and reward statistics of a batch of pairs' scores."""
    both = torch.cat([chosen, rejected])
    return {
        "margin": (chosen - rejected).mean(),
        "mean_reward": both.mean(),
        "min_reward": both.min(),
        "max_reward": both.max(),
    }


def reward_model_from_policy(lm: nn.Module, pad_token_id: int, num_layers: int, seed: int) -> nn.Module:
    """A GPT2ForSequenceClassification with one label (on the CPU): its transformer the policy ``lm``'s as it is now
    (after the warm-up of sort and add, if any), its score head new (drawn with ``seed``), pad_token_id the
    tokenizer's. With ``num_layers`` N > 0 its transformer is the policy's embeddings and first N blocks (and final
    layer norm). train_reward_model.py starts from it; so does each refresh of ``--online.retrain``. Raises
    ConfigError when the policy has fewer blocks."""
    from transformers import GPT2ForSequenceClassification

    config = lm.config.__class__.from_dict(lm.config.to_dict())
    config.num_labels = 1
    config.pad_token_id = pad_token_id
    config.architectures = ["GPT2ForSequenceClassification"]
    layers = num_layers or config.n_layer
    if layers > config.n_layer:
        raise ConfigError(
            f"num_layers={layers} is more than the policy's {config.n_layer} blocks; give 1 to {config.n_layer}, "
            "or 0 for all of them."
        )
    config.n_layer = layers
    torch.manual_seed(seed)
    model = GPT2ForSequenceClassification(config)
    kept = {
        k: v for k, v in lm.transformer.state_dict().items() if not k.startswith("h.") or int(k.split(".")[1]) < layers
    }
    model.transformer.load_state_dict(kept)
    model.eval()  # no dropout, as the policy in every run here: scores of a sequence are deterministic
    return model
