"""The rule-based sentiment reward (not graded)."""

from __future__ import annotations

import pytest
import torch

from rlhf_practice.config import RewardConfig
from rlhf_practice.reward import RuleBasedReward, build_reward, sentiment_polarities, short_reply_penalty, words

CASES = [
    ("positive", "A wonderful, moving film. I loved it!", 1.0),
    ("negative", "Boring and predictable; the worst movie of the year.", -1.0),
    ("negated positive", "This movie was not good at all.", -1.0),
    ("negated negative", "Honestly it wasn't bad.", 1.0),
    ("contraction", "I didn't find it funny", -1.0),
    ("mixed", "Great acting, but a boring plot.", 0.0),
    ("two to one", "Great cast, great music, terrible ending.", 1 / 3),
    ("negation stops at a clause break", "Not a film I expected. Good though.", 1.0),
    ("negation too far back", "Never have I seen such a long and good film", 1.0),
    ("case and punctuation", "GREAT!!! ...Great??", 1.0),
    ("no sentiment words", "The film runs two hours.", 0.0),
    ("empty", "", 0.0),
    ("whitespace", "   \n\t ", 0.0),
    ("emoji only", "🎬🍿👍", 0.0),
    ("emoji and words", "great 👍👍", 1.0),
    ("chinese", "这部电影很好看", 0.0),
    ("chinese and english", "电影 terrible 电影", -1.0),
    ("curly apostrophe", "It isn\u2019t bad", 1.0),
    ("fullwidth letters", "ＧＲＥＡＴ", 1.0),
]


@pytest.mark.parametrize(("text", "expected"), [(t, e) for _, t, e in CASES], ids=[n for n, _, _ in CASES])
def test_reward_table(text: str, expected: float) -> None:
    assert build_reward()([text]).tolist() == pytest.approx([expected])


def test_reward_batch_shape_dtype_and_range() -> None:
    texts = [t for _, t, _ in CASES] + ["\x00\ud800 odd", "a" * 10_000]
    out = build_reward()(texts)
    assert out.shape == (len(texts),) and out.dtype == torch.float32
    assert bool(((out >= -1) & (out <= 1)).all())


def test_words_and_polarities() -> None:
    assert words("It's GREAT, isn't it? 10/10 🎉") == ["it's", "great", "isn't", "it"]
    assert sentiment_polarities("Not good. Great!") == [-1, 1]


def test_short_reply_penalty_is_off_by_default_and_composes() -> None:
    assert build_reward()(["good"]).item() == 1.0
    reward = build_reward(RewardConfig(short_penalty_weight=0.5, short_min_words=4))
    assert reward(["good", "a really good movie"]).tolist() == [0.5, 1.0]
    assert short_reply_penalty("one two three", min_words=4) == -1.0
    assert short_reply_penalty("one two three four", min_words=4) == 0.0


def test_a_new_term_is_a_few_lines() -> None:
    def i_think_bonus(text: str) -> float:
        return 1.0 if words(text)[:2] == ["i", "think"] else 0.0

    reward = build_reward()
    reward.terms.append((0.5, i_think_bonus))
    assert reward(["I think it is dull", "It is dull"]).tolist() == [-0.5, -1.0]


def test_total_is_clipped_to_the_unit_interval() -> None:
    reward = RuleBasedReward([(1.0, lambda t: 5.0), (1.0, lambda t: 0.0)])
    assert reward(["x"]).item() == 1.0
