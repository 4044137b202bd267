"""The rule-based sentiment reward (not graded)."""

from __future__ import annotations

import pytest
import torch

from rlhf_practice.config import RewardConfig
from rlhf_practice.reward import (
    RuleBasedReward,
    build_reward,
    excess_praise_penalty,
    long_reply_penalty,
    sentiment_polarities,
    short_reply_penalty,
    words,
)

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
    # The corpus's own phrases (scripts/build_tiny_assets.py), and what IMDB reviews write.
    ("really liked", "I really liked the plot.", 1.0),
    ("adored", "I adored the cast.", 1.0),
    ("was moved by", "I was moved by the ending.", 1.0),
    ("disliked", "I disliked the script.", -1.0),
    ("could not stand", "I could not stand the music.", -1.0),
    ("can't stand", "I can't stand this director.", -1.0),
    ("was annoyed by", "I was annoyed by the dialogue.", -1.0),
    ("cannot", "I cannot recommend it.", -1.0),
    ("can not", "I can not recommend it.", -1.0),
    ("negation four words back", "I do not think it is good.", -1.0),
    ("not bad", "Not bad at all.", 1.0),
    ("no doubt", "No doubt the best film of the year.", 1.0),
    ("nothing but", "Nothing but great performances.", 1.0),
    ("not only", "Not only funny but also moving.", 1.0),
    ("would not recommend", "I would not recommend it to anyone.", -1.0),
    ("never felt dull", "The story never felt dull.", 1.0),
    ("waste of time", "What a waste of time.", -1.0),
    # Known limits, kept as documented behaviour (TASKS.md §5 offers them as exercises):
    ("limit: negation across a comma", "It was not, I think, a good film.", 1.0),
    ("limit: sarcasm", "Oh great, another two hours I will never get back.", 1.0),
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


def test_long_reply_penalty_is_off_by_default_and_composes() -> None:
    assert build_reward()(["a really good movie with a great cast"]).item() == 1.0
    reward = build_reward(RewardConfig(long_penalty_weight=0.5, long_max_words=4))
    assert reward(["a really good movie", "a really good movie indeed"]).tolist() == [1.0, 0.5]
    assert long_reply_penalty("one two three four", max_words=4) == 0.0
    assert long_reply_penalty("one two three four five", max_words=4) == -1.0


def test_excess_praise_penalty_is_off_by_default_and_composes() -> None:
    """Task 15's gold: one positive word is free, each further one costs its weight; "not good" is no praise."""
    texts = ["a good film", "great great great", "not good, but great", "great and wonderful", "bad"]
    assert build_reward()(texts).tolist() == [1.0, 1.0, 0.0, 1.0, -1.0]
    assert build_reward(RewardConfig(praise_penalty_weight=0.5))(texts).tolist() == [1.0, 0.0, 0.0, 0.5, -1.0]
    assert excess_praise_penalty("Great acting, great story, a great film.") == -2.0
    assert excess_praise_penalty("not good, not great") == 0.0
    assert excess_praise_penalty("great great great", free_words=3) == 0.0


def test_a_new_term_is_a_few_lines() -> None:
    def i_think_bonus(text: str) -> float:
        return 1.0 if words(text)[:2] == ["i", "think"] else 0.0

    reward = build_reward()
    reward.terms.append((0.5, i_think_bonus))
    assert reward(["I think it is dull", "It is dull"]).tolist() == [-0.5, -1.0]


def test_total_is_clipped_to_the_unit_interval() -> None:
    reward = RuleBasedReward([(1.0, lambda t: 5.0), (1.0, lambda t: 0.0)])
    assert reward(["x"]).item() == 1.0


def _corpus_lists():
    import importlib.util

    from rlhf_practice import PACKAGE_DIR

    spec = importlib.util.spec_from_file_location(
        "build_tiny_assets", PACKAGE_DIR.parent / "scripts/build_tiny_assets.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_phrase_the_corpus_writes_is_scored_with_its_sign() -> None:
    """The reward reads its own corpus: the phrases come from the generator's lists, so the two cannot drift."""
    corpus = _corpus_lists()
    reward = build_reward()
    for sign, adjectives, verbs in ((1.0, corpus.POS_ADJ, corpus.POS_VERBS), (-1.0, corpus.NEG_ADJ, corpus.NEG_VERBS)):
        for adj in adjectives:
            assert reward([f"the plot is {adj}."]).item() == sign, adj
            assert reward([f"the plot was not {adj} at all."]).item() == -sign, f"not {adj}"
        for verb in verbs:
            assert reward([f"I {verb} the plot."]).item() == sign, verb
