"""Build the offline assets of the ``tiny`` preset into ``rlhf_practice/assets/``.

1. ``tiny_reviews.parquet``: a synthetic movie-review corpus in IMDB's schema (``text``, ``label``),
   written by the generator below: balanced labels, mixed reviews, negations, varied lengths.
2. ``tiny_gpt2/``: a byte-level BPE tokenizer trained on the corpus, and a small ``GPT2LMHeadModel``
   pretrained on it, so that its samples read like the corpus and are mixed in sentiment.

Deterministic for a given ``--seed``: the corpus and the tokenizer are identical on every run; the
model is trained with fixed seeds. Runs in a few minutes on a 2-core CPU and prints what it made.

    python scripts/build_tiny_assets.py            # rebuild everything
    python scripts/build_tiny_assets.py --check    # only re-measure the committed model's reward
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlhf_practice.data import TINY_CORPUS, LeftPadCollator, PromptDataset  # noqa: E402
from rlhf_practice.modeling import TINY_MODEL_DIR, PolicyValueModel, load_tokenizer  # noqa: E402
from rlhf_practice.reward import build_reward, words  # noqa: E402
from rlhf_practice.sampling import Sampler  # noqa: E402

# ----------------------------------------------------------------------------- corpus generator

FIRST_NAMES = (
    "Anna Ben Carla David Elena Frank Grace Henry Irene Jack Karen Leo Maria Nick Olivia Paul Rosa Sam "
    "Tina Victor Walter Yvonne Omar Lucy Hugo Nora Felix Clara Marco Julia"
).split()
LAST_NAMES = (
    "Adams Baker Carter Dawson Ellis Fisher Grant Hayes Irving Jensen Keller Lambert Morgan Nolan Ortiz "
    "Parker Quinn Reyes Stone Turner Vaughn Walsh Young Brooks Lowe Marsh Russo Shaw Webb Harper"
).split()
TITLE_ADJ = "Silent Broken Last Golden Dark Hidden Lost Crimson Endless Frozen Wild Distant Burning Quiet Final".split()
TITLE_NOUN = (
    "River Summer Road Garden Winter Island Letter Promise Storm City Harbor Mirror Night Kingdom Station".split()
)
GENRES = "horror comedy drama western thriller romance war crime mystery fantasy musical adventure family".split()
FILM = ["movie", "film", "picture", "flick"]
ASPECTS = (
    "story|plot|acting|script|dialogue|music|soundtrack|ending|cast|direction|pacing|cinematography|"
    "humor|characters|special effects|editing|first half|final act|villain|score|photography|lead performance"
).split("|")
ROLES = "detective|young doctor|old farmer|soldier|teacher|singer|mother|father|thief|captain|lawyer|nurse|priest|boxer".split(
    "|"
)
PLACES = (
    "Italy|Texas|Scotland|Mexico|Canada|Morocco|Ireland|Japan|Norway|Brazil|a small studio|the desert|New York".split(
        "|"
    )
)
SUBJECTS = "a family|two brothers|a lonely writer|a young couple|an old sailor|a group of friends|a retired cop|a small town".split(
    "|"
)
PLOT_VERBS = (
    "trying to find|running away from|fighting for|falling in love with|searching for|hiding from|looking after".split(
        "|"
    )
)
PLOT_OBJECTS = (
    "a lost child|the truth|a stolen painting|their past|a second chance|an old house|the killer|their home".split("|")
)
COMPANY = "my wife|my husband|a friend|my kids|my parents|my sister|a few friends|my brother".split("|")
WHEN = "last night|last week|on a plane|on television|at a festival|yesterday|over the weekend|years ago".split("|")
INTENSIFIERS = ["", "", "really ", "very ", "quite ", "truly ", "rather ", "so "]

POS_ADJ = (
    "good great excellent wonderful amazing brilliant superb fantastic outstanding perfect beautiful lovely "
    "enjoyable charming delightful touching moving gripping stunning memorable entertaining powerful clever "
    "fascinating impressive inspiring refreshing solid nice strong terrific splendid funny"
).split()
NEG_ADJ = (
    "bad awful terrible horrible boring dull poor stupid disappointing annoying ridiculous lame weak pointless "
    "mediocre bland cheesy unfunny painful forgettable tedious predictable awkward clumsy dreadful pathetic "
    "laughable silly slow ugly"
).split()
POS_VERBS = ["loved", "enjoyed", "really liked", "adored", "was moved by"]
NEG_VERBS = ["hated", "disliked", "could not stand", "was bored by", "was annoyed by"]
NEUTRAL_ADJ = "long short quiet loud dark bright simple strange old-fashioned modern".split()
SHORT_SHARE = 0.5  # share of reviews that are one or two sentences (a tiny-preset reply can end early)


def _cap(sentence: str) -> str:
    return sentence[0].upper() + sentence[1:]


class ReviewWriter:
    """Writes one review at a time from templates; every choice comes from ``self.rng``."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def pick(self, options):
        return self.rng.choice(options)

    def actor(self) -> str:
        return f"{self.pick(FIRST_NAMES)} {self.pick(LAST_NAMES)}"

    def title(self) -> str:
        return f"The {self.pick(TITLE_ADJ)} {self.pick(TITLE_NOUN)}"

    def opener(self) -> str:
        r = self.rng
        return self.pick(
            [
                f"I watched this {self.pick(FILM)} {self.pick(WHEN)} with {self.pick(COMPANY)}.",
                f"{self.title()} is a {self.pick(GENRES)} {self.pick(FILM)} from {r.randint(1950, 2023)}.",
                f"This is the {self.pick(['first', 'second', 'third', 'latest'])} {self.pick(GENRES)} film by {self.actor()}.",
                f"I had heard a lot about this {self.pick(FILM)} before I saw it.",
                f"{self.title()} tells the story of {self.pick(SUBJECTS)} {self.pick(PLOT_VERBS)} {self.pick(PLOT_OBJECTS)}.",
                f"I rented this {self.pick(FILM)} because I like {self.pick(GENRES)} films.",
                f"{self.actor()} stars as a {self.pick(ROLES)} in this {self.pick(GENRES)} {self.pick(FILM)}.",
            ]
        )

    def positive(self) -> str:
        a, i = self.pick(ASPECTS), self.pick(INTENSIFIERS)
        return self.pick(
            [
                f"the {a} is {i}{self.pick(POS_ADJ)}.",
                f"the {a} was {i}{self.pick(POS_ADJ)} and the {self.pick(ASPECTS)} was {self.pick(POS_ADJ)}.",
                f"{self.actor()} is {self.pick(POS_ADJ)} as the {self.pick(ROLES)}.",
                f"I {self.pick(POS_VERBS)} the {a}.",
                f"the {a} was not {self.pick(NEG_ADJ)} at all.",
                f"it is one of the best {self.pick(GENRES)} films I have seen.",
                f"I would recommend it to anyone who likes {self.pick(GENRES)}.",
                f"a {self.pick(POS_ADJ)} {self.pick(FILM)} with a {self.pick(POS_ADJ)} {a}.",
                f"the {a} never felt {self.pick(NEG_ADJ)}.",
                f"what a {i}{self.pick(POS_ADJ)} {self.pick(FILM)}.",
            ]
        )

    def negative(self) -> str:
        a, i = self.pick(ASPECTS), self.pick(INTENSIFIERS)
        return self.pick(
            [
                f"the {a} is {i}{self.pick(NEG_ADJ)}.",
                f"the {a} was {i}{self.pick(NEG_ADJ)} and the {self.pick(ASPECTS)} was {self.pick(NEG_ADJ)}.",
                f"{self.actor()} is {self.pick(NEG_ADJ)} as the {self.pick(ROLES)}.",
                f"I {self.pick(NEG_VERBS)} the {a}.",
                f"the {a} was not {self.pick(POS_ADJ)} at all.",
                f"it is one of the worst {self.pick(GENRES)} films I have seen.",
                "what a waste of time.",
                "I would not recommend it to anyone.",
                f"a {self.pick(NEG_ADJ)} {self.pick(FILM)} with a {self.pick(NEG_ADJ)} {a}.",
                f"the {a} was never {self.pick(POS_ADJ)}.",
            ]
        )

    def neutral(self) -> str:
        r = self.rng
        return self.pick(
            [
                f"the {self.pick(FILM)} is about {self.pick(SUBJECTS)} {self.pick(PLOT_VERBS)} {self.pick(PLOT_OBJECTS)}.",
                f"it runs about {r.randint(80, 180)} minutes.",
                f"it was shot in {self.pick(PLACES)} in {r.randint(1950, 2023)}.",
                f"{self.actor()} plays the {self.pick(ROLES)}.",
                f"I saw it {self.pick(WHEN)} with {self.pick(COMPANY)}.",
                f"the {self.pick(ASPECTS)} is {self.pick(NEUTRAL_ADJ)}.",
                f"most of the {self.pick(FILM)} takes place in {self.pick(PLACES)}.",
            ]
        )

    def closer(self, label: int) -> str:
        r = self.rng
        if label == 1:
            return self.pick(
                [
                    f"Overall a {self.pick(POS_ADJ)} {self.pick(FILM)}.",
                    f"{r.randint(7, 10)} out of 10.",
                    "Go and see it.",
                    "",
                ]
            )
        return self.pick(
            [
                f"Overall a {self.pick(NEG_ADJ)} {self.pick(FILM)}.",
                f"{r.randint(1, 4)} out of 10.",
                "Skip this one.",
                "",
            ]
        )

    def short_review(self, label: int) -> str:
        """One sentence and maybe a closing verdict, no opener: "The plot is great. 8 out of 10." """
        first = self.positive() if label == 1 else self.negative()
        return " ".join(s for s in (_cap(first), self.pick([self.closer(label), ""])) if s)

    def review(self, label: int) -> str:
        """One review; ``label`` 1 = positive, 0 = negative. Some reviews are mixed on purpose; some are
        a sentence or two long, so that a reply of a dozen tokens may reach its end (EOS)."""
        r = self.rng
        if r.random() < SHORT_SHARE:
            return self.short_review(label)
        share_on_label = r.choice([0.55, 0.65, 0.75, 0.9, 1.0])  # below 1: a mixed review
        body = []
        for _ in range(r.randint(2, 7)):
            u = r.random()
            if u < 0.3:
                body.append(self.neutral())
            elif (u - 0.3) / 0.7 < share_on_label:
                body.append(self.positive() if label == 1 else self.negative())
            else:
                body.append(self.negative() if label == 1 else self.positive())
        sentences = [self.opener(), *(_cap(s) for s in body), self.closer(label)]
        return " ".join(s for s in sentences if s)


def make_corpus(num_reviews: int, seed: int) -> list[dict]:
    """``num_reviews`` reviews, half positive and half negative, in a seeded random order."""
    writer = ReviewWriter(seed)
    rows = [{"text": writer.review(i % 2), "label": i % 2} for i in range(num_reviews)]
    random.Random(seed + 1).shuffle(rows)
    return rows


# ----------------------------------------------------------------------------- tokenizer


def train_tokenizer(texts: list[str], vocab_size: int, out_dir: Path):
    """Byte-level BPE trained on ``texts``, saved as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>", "<|pad|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        pad_token="<|pad|>",
        model_max_length=128,
    )
    fast.save_pretrained(out_dir)
    return fast


# ----------------------------------------------------------------------------- model


def pretrain(texts: list[str], tokenizer, args) -> torch.nn.Module:
    """A small GPT-2 trained to continue reviews from their first token to EOS."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(args.seed)
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=args.context,
        n_embd=args.n_embd,
        n_layer=args.n_layer,
        n_head=args.n_head,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = GPT2LMHeadModel(config)
    ids = tokenizer(texts, add_special_tokens=False, truncation=True, max_length=args.context - 1)["input_ids"]
    ids = [x + [tokenizer.eos_token_id] for x in ids]
    ids.sort(key=len)  # batches of similar length waste little on padding
    batches = [ids[i : i + args.batch_size] for i in range(0, len(ids), args.batch_size)]
    total_steps = args.epochs * len(batches)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / 100) * 0.5 * (1 + math.cos(math.pi * min(s, total_steps) / total_steps))
    )
    rng = random.Random(args.seed)
    model.train()
    step, start = 0, time.time()
    for epoch in range(args.epochs):
        rng.shuffle(batches)
        for batch in batches:
            width = max(len(x) for x in batch)
            input_ids = torch.tensor([x + [tokenizer.pad_token_id] * (width - len(x)) for x in batch])
            mask = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in batch])
            labels = input_ids.masked_fill(mask == 0, -100)
            loss = model(input_ids=input_ids, attention_mask=mask, labels=labels).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            step += 1
            if step % 200 == 0 or step == total_steps:
                print(
                    f"  pretrain step {step}/{total_steps} epoch {epoch} loss {loss.item():.3f} ({time.time() - start:.0f}s)"
                )
    model.eval()
    return model


def measure_reward(num_prompts: int, seed: int) -> dict:
    """Mean reward of the shipped model's continuations of corpus prompts (tiny preset settings)."""
    from rlhf_practice.config import PPOConfig, preset_config

    cfg = preset_config(PPOConfig, "tiny")
    tokenizer = load_tokenizer("tiny")
    policy = PolicyValueModel.from_pretrained("tiny")
    texts = pq.read_table(TINY_CORPUS).column("text").to_pylist()
    rng = random.Random(seed)
    dataset = PromptDataset(
        rng.sample(texts, num_prompts), tokenizer, cfg.data.min_prompt_length, cfg.data.max_prompt_length, seed
    )
    collate = LeftPadCollator(tokenizer)
    reward_fn = build_reward(cfg.reward)
    sampler = Sampler(policy, tokenizer, max_new_tokens=cfg.max_new_tokens)
    torch.manual_seed(seed)
    rewards, samples = [], []
    for i in range(0, len(dataset), 64):
        batch = collate([dataset[j] for j in range(i, min(i + 64, len(dataset)))])
        gen = sampler.sample(batch["input_ids"], batch["attention_mask"])
        replies = gen.decode(tokenizer)
        rewards.append(reward_fn(replies))
        samples += [p + " |" + r for p, r in zip(batch["prompt_text"], replies)]
    rewards = torch.cat(rewards)
    return {
        "mean_reward": round(rewards.mean().item(), 4),
        "share_positive": round((rewards > 0).float().mean().item(), 4),
        "share_negative": round((rewards < 0).float().mean().item(), 4),
        "samples": samples[:6],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--num_reviews", type=int, default=12000)
    parser.add_argument("--vocab_size", type=int, default=2048)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--n_embd", type=int, default=128)
    parser.add_argument("--n_layer", type=int, default=4)
    parser.add_argument("--n_head", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--reward_prompts", type=int, default=1024)
    parser.add_argument("--check", action="store_true", help="only measure the committed model's reward")
    args = parser.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    start = time.time()

    if not args.check:
        rows = make_corpus(args.num_reviews, args.seed)
        TINY_CORPUS.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows), TINY_CORPUS, compression="zstd")
        texts = [r["text"] for r in rows]
        vocab = {w for t in texts for w in words(t)}
        lengths = sorted(len(t.split()) for t in texts)
        print(
            f"corpus: {len(rows)} reviews, {sum(r['label'] for r in rows)} positive, {len(vocab)} distinct words, "
            f"words per review min/median/max {lengths[0]}/{lengths[len(lengths) // 2]}/{lengths[-1]}"
        )
        TINY_MODEL_DIR.mkdir(parents=True, exist_ok=True)
        tokenizer = train_tokenizer(texts, args.vocab_size, TINY_MODEL_DIR)
        print(f"tokenizer: {len(tokenizer)} tokens, eos={tokenizer.eos_token!r}, pad={tokenizer.pad_token!r}")
        model = pretrain(texts, tokenizer, args)
        model.save_pretrained(TINY_MODEL_DIR)
        (TINY_MODEL_DIR / "build_info.json").write_text(json.dumps(vars(args), indent=2) + "\n")
        print(f"model: {sum(p.numel() for p in model.parameters()):,} parameters")

    figures = measure_reward(args.reward_prompts, args.seed)
    for sample in figures.pop("samples"):
        print(f"  sample: {sample}")
    sizes = {
        p.relative_to(TINY_MODEL_DIR.parent).as_posix(): p.stat().st_size
        for p in sorted(TINY_MODEL_DIR.parent.rglob("*"))
        if p.is_file()
    }
    figures["asset_bytes"] = sizes
    figures["asset_bytes_total"] = sum(sizes.values())
    figures["seconds"] = round(time.time() - start, 1)
    print(json.dumps(figures, indent=2))
    ok = -0.3 <= figures["mean_reward"] <= 0.3
    print(f"mean reward {figures['mean_reward']} {'within' if ok else 'OUTSIDE'} [-0.3, 0.3]")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
