"""A rule-based sentiment reward: one score in [-1, 1] per text.

The reward is a weighted sum of small *terms*, clipped to [-1, 1]. A term is any function
``str -> float``; to add one (a keyword bonus, a reply that opens with "I think", ...), write the
function and append ``(weight, function)`` to ``terms`` in :func:`build_reward`, which the sentiment
task (:mod:`rlhf_practice.tasks.sentiment`) calls to build the reward of every run::

    def i_think_bonus(text: str) -> float:
        return 1.0 if words(text)[:2] == ["i", "think"] else 0.0

    terms.append((0.5, i_think_bonus))  # in build_reward, before its return

:func:`short_reply_penalty` and :func:`long_reply_penalty` are the worked examples that ship with
the package (both off by default). :func:`excess_praise_penalty` is the reader who distrusts gushing
(task 15's gold, also off by default): a review may praise once, and each further positive word costs.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

import torch

from rlhf_practice.config import RewardConfig

POSITIVE_WORDS = frozenset(
    """
    good great excellent wonderful amazing brilliant superb fantastic outstanding perfect
    beautiful lovely enjoyable enjoy enjoyed loved love loves best fun funny hilarious charming delightful
    liked adore adored moved
    touching moving gripping stunning memorable masterpiece favorite favourite recommend
    recommended entertaining powerful clever fascinating impressive inspiring refreshing
    solid nice strong terrific splendid
    """.split()
)

NEGATIVE_WORDS = frozenset(
    """
    bad awful terrible horrible worst worse boring bored dull waste wasted poor stupid
    disappointing disappointed disappointment annoying ridiculous lame weak pointless mediocre
    bland cheesy unfunny painful forgettable tedious hated hate garbage mess predictable
    awkward clumsy dreadful pathetic laughable silly slow ugly disliked dislike annoyed hates
    """.split()
)

NEGATIONS = frozenset("not no never nothing hardly barely neither nor without cannot".split())

ONLY_AFTER_NEGATION = {"stand": -1}
"""Words with a sentiment only after a negation, not flipped by it: "could not stand", "can't stand"."""

NOT_NEGATING = {("no", "doubt"), ("nothing", "but"), ("not", "only")}
"""Negation words that do not negate when the next word is this: "no doubt the best", "nothing but great"."""

NEGATION_WINDOW = 4
"""A negation flips a sentiment word at most this many words after it, within one clause
("I do not think it is good": four words back). A comma ends a clause, so "It was not, I think, a
good film" reads as positive: a known limit, like sarcasm (TASKS.md §5 offers both as exercises)."""

_CLAUSE_BREAK = re.compile(r"[.!?;:,\n]+")
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def words(text: str) -> list[str]:
    """Lower-cased words of ``text``: punctuation, digits, emoji and non-Latin script dropped."""
    text = unicodedata.normalize("NFKC", text).lower().replace("\u2019", "'")
    return _WORD.findall(text)


def _is_negation(clause_words: list[str], j: int) -> bool:
    word, after = clause_words[j], clause_words[j + 1] if j + 1 < len(clause_words) else ""
    return (word in NEGATIONS or word.endswith("n't")) and (word, after) not in NOT_NEGATING


def sentiment_polarities(text: str) -> list[int]:
    """+1 / -1 for each sentiment word of ``text``, flipped when a negation shortly precedes it.

    >>> sentiment_polarities("Not good. Great!")
    [-1, 1]
    """
    polarities = []
    for clause in _CLAUSE_BREAK.split(unicodedata.normalize("NFKC", text)):
        clause_words = words(clause)
        for i, word in enumerate(clause_words):
            negated = any(_is_negation(clause_words, j) for j in range(max(0, i - NEGATION_WINDOW), i))
            if word in ONLY_AFTER_NEGATION:
                if negated:
                    polarities.append(ONLY_AFTER_NEGATION[word])
                continue
            polarity = (word in POSITIVE_WORDS) - (word in NEGATIVE_WORDS)
            if polarity:
                polarities.append(-polarity if negated else polarity)
    return polarities


def sentiment_term(text: str) -> float:
    """(#positive - #negative) / (#positive + #negative) over sentiment words; 0 if there are none."""
    polarities = sentiment_polarities(text)
    return sum(polarities) / len(polarities) if polarities else 0.0


def short_reply_penalty(text: str, min_words: int = 4) -> float:
    """Worked example of an extra term: -1 for a reply with fewer than ``min_words`` words, else 0."""
    return -1.0 if len(words(text)) < min_words else 0.0


def long_reply_penalty(text: str, max_words: int = 6) -> float:
    """The opposite example: -1 for a reply with more than ``max_words`` words, else 0."""
    return -1.0 if len(words(text)) > max_words else 0.0


def excess_praise_penalty(text: str, free_words: int = 1) -> float:
    """Task 15's term, a reader who distrusts gushing: minus the positive words beyond ``free_words``
    (each +1 of :func:`sentiment_polarities`, so "not good" is no praise), 0 for a reply within them.

    >>> excess_praise_penalty("Great acting, great story, a great film.")
    -2.0
    """
    return -float(max(0, sum(p > 0 for p in sentiment_polarities(text)) - free_words))


RewardTerm = Callable[[str], float]


@dataclass
class RuleBasedReward:
    """``reward(texts)`` -> tensor of shape (N,), float32, each ``clip(sum_i w_i * term_i(text), -1, 1)``."""

    terms: list[tuple[float, RewardTerm]] = field(default_factory=lambda: [(1.0, sentiment_term)])

    def score(self, text: str) -> float:
        """The reward of one text, in [-1, 1]."""
        total = sum(weight * term(text) for weight, term in self.terms if weight != 0)
        return max(-1.0, min(1.0, total))

    def __call__(self, texts: Sequence[str]) -> torch.Tensor:
        return torch.tensor([self.score(t) for t in texts], dtype=torch.float32)


def build_reward(config: RewardConfig | None = None) -> RuleBasedReward:
    """The reward a run uses, assembled from ``config`` (the defaults when None)."""
    config = config or RewardConfig()
    terms: list[tuple[float, RewardTerm]] = [(config.sentiment_weight, sentiment_term)]
    if config.short_penalty_weight:
        terms.append((config.short_penalty_weight, partial(short_reply_penalty, min_words=config.short_min_words)))
    if config.long_penalty_weight:
        terms.append((config.long_penalty_weight, partial(long_reply_penalty, max_words=config.long_max_words)))
    if config.praise_penalty_weight:
        terms.append(
            (config.praise_penalty_weight, partial(excess_praise_penalty, free_words=config.praise_free_words))
        )
    return RuleBasedReward(terms)
