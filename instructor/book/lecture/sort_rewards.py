"""The grading book of sort_distance_reward and sort_inclusion_ordering_reward (rlhf_practice/rl/lecture.py,
TASKS.md §10.1), whose cases one builder makes: see :mod:`instructor.book`.
"""

from __future__ import annotations

from collections import Counter

import torch

from instructor.cases import _adder, _perm, cases_of
from instructor.mistakes import right, wrong

# ================ the inputs of both sort rewards ===================================================================

# Shapes follow the lecture: [batch, trial, pos] = prompts, replies sampled per prompt, positions of a reply.

SORT_BOOK_PROMPT = [3, 1, 0, 2]  # TASKS.md §10.1: three replies to one prompt
SORT_BOOK_REPLIES = ([0, 1, 2, 3], [7, 2, 2, 5], [0, 3, 1, 2])
# Numbers that occur twice in the prompt: inclusion counts each prompt entry that occurs anywhere in the
# response; these pairs tell it from counting the response's entries, distinct numbers, or copy for copy.
SORT_DUPLICATES = (
    ([2, 0, 2, 1], [0, 1, 2, 2]),
    ([2, 0, 2, 1], [2, 2, 2, 2]),
    ([2, 0, 2, 1], [0, 1, 2, 5]),
    ([2, 0, 2, 1], [0, 2, 1, 2]),
    ([2, 2, 1, 1], [2, 2, 2, 1]),
)


def _sort_cases(function: str):
    """The case builder of one of the two sort rewards (they take the same inputs)."""

    def build(key, g: torch.Generator, fresh: bool) -> list[dict]:
        cases: list[dict] = []
        add = _adder(key, cases, function, fresh)

        def pair(prompt, response) -> list:
            return [("prompt", prompt), ("response", response)]

        def tag(numbers) -> str:
            return "".join(map(str, numbers))

        book_prompt, book_replies, duplicates, one = SORT_BOOK_PROMPT, SORT_BOOK_REPLIES, SORT_DUPLICATES, (5, 4)
        example = " (the §10.1 example)"
        if fresh:  # the same kinds of reply (sorted, other numbers with a repeat, shuffled) to another prompt
            digits = SORT_BOOK_PROMPT + [-1]
            while digits[:4] == SORT_BOOK_PROMPT:
                digits = _perm(g, 10).tolist()
            book_prompt, others = digits[:4], digits[4:]
            shuffled = list(book_prompt)
            while shuffled == sorted(book_prompt):
                shuffled = [book_prompt[i] for i in _perm(g, 4).tolist()]
            repeat = book_prompt[int(torch.randint(0, 4, (), generator=g))]
            book_replies = (sorted(book_prompt), [others[0], repeat, repeat, others[1]], shuffled)
            # The duplicates' numbers mapped in order onto other ones: the same ties and orderings.
            numbers = sorted({n for p, r in SORT_DUPLICATES for n in p + r})
            onto = dict(zip(numbers, numbers))
            while list(onto.values()) == numbers:
                onto = dict(zip(numbers, sorted(_perm(g, 10)[: len(numbers)].tolist())))
            duplicates = tuple(([onto[n] for n in p], [onto[n] for n in r]) for p, r in SORT_DUPLICATES)
            one = tuple(_perm(g, 9)[:2].add(6).remainder(10).tolist())  # never 5 first (the book's [5], [5])
            example = " (a fresh variant of the §10.1 example)"
        for reply in book_replies:
            add(
                f"book_example_{tag(reply)}",
                f"{function}(prompt={book_prompt}, response={reply}){example}",
                pair(book_prompt, reply),
                book="§10.1",
            )
            add(
                f"book_example_{tag(reply)}_tensors",
                f"{function}(prompt=torch.tensor({book_prompt}), response=torch.tensor({reply}))",
                pair(torch.tensor(book_prompt), torch.tensor(reply)),
            )
        for prompt, reply in duplicates:
            add(
                f"duplicates_{tag(prompt)}_{tag(reply)}",
                f"{function}(prompt={prompt}, response={reply}) (numbers that occur twice in the prompt)",
                pair(prompt, reply),
            )
        right, wrong = one
        add("one_number", f"{function}(prompt=[{right}], response=[{right}])", pair([right], [right]))
        add("one_wrong_number", f"{function}(prompt=[{right}], response=[{wrong}])", pair([right], [wrong]))
        add(
            "inputs_unmodified",
            f"{function}(prompt={book_prompt}, response={book_replies[2]})",
            pair(list(book_prompt), list(book_replies[2])),
            unmodified=True,
        )
        for n in (3, 5, 8):
            prompt = torch.randint(0, 10, (n,), generator=g)
            replies = {
                "random": torch.randint(0, 10, (n,), generator=g),
                "shuffled": prompt[torch.randperm(n, generator=g)],
                "sorted": prompt.sort().values,
                "nearly_sorted": torch.cat([prompt.sort().values[1:], prompt.sort().values[:1]]),
            }
            for name, reply in replies.items():
                as_list = name in ("random", "sorted")  # lists and tensors, as the contract allows both
                args = pair(prompt.tolist(), reply.tolist()) if as_list else pair(prompt, reply)
                add(
                    f"random_n{n}_{name}_{'list' if as_list else 'tensor'}",
                    f"{function}(prompt={prompt.tolist()}, response={reply.tolist()}) as "
                    + ("lists" if as_list else "1-D int64 tensors"),
                    args,
                )
        return cases

    build.__name__ = f"{function}_cases"
    return build


# ================ sort_distance_reward (TASKS.md §10.1) =============================================================

# --- its cases


sort_distance_cases = cases_of("sort_distance_reward")(_sort_cases("sort_distance_reward"))


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


@right("sort_distance_reward")
def lecture_style_int_count(prompt, response):
    ground_truth = sorted(prompt)
    return sum(1 for x, y in zip(response, ground_truth) if x == y)  # an int: a right answer too


@right("sort_distance_reward")
def with_tensors(prompt, response):
    target = torch.as_tensor(prompt).sort().values
    return float((torch.as_tensor(response) == target).sum())


@wrong(
    "sort_distance_reward",
    "compared with the prompt as given; compare with sorted(prompt) (a tensor's .sort() returns new tensors, it does not sort in place)",
)
def compared_with_the_prompt(prompt, response):
    return float(sum(int(x) == int(y) for x, y in zip(response, prompt)))


@wrong(
    "sort_distance_reward",
    "sorted the prompt with prompt.sort() and compared with it: a list is sorted in place (the caller's prompt "
    "changes), a tensor's .sort() returns new tensors and leaves it unsorted; compare with sorted(prompt)",
)
def sorts_the_prompt_in_place(prompt, response):
    target = prompt
    target.sort()  # a list is sorted in place; a tensor's .sort() returns new tensors and leaves it as it was
    return float(sum(int(x) == int(y) for x, y in zip(response, target)))


@wrong("sort_distance_reward", "sorted largest first; the right answer is sorted(prompt), smallest first")
def sorted_descending(prompt, response):
    target = sorted((int(x) for x in prompt), reverse=True)
    return float(sum(int(x) == y for x, y in zip(response, target)))


@wrong("sort_distance_reward", "sorted the response too; compare the response as written with sorted(prompt)")
def sorted_the_response_too(prompt, response):
    target = sorted(int(x) for x in prompt)
    return float(sum(x == y for x, y in zip(sorted(int(x) for x in response), target)))


@wrong("sort_distance_reward", "convert it with float(...) or .item()")
def returns_a_tensor(prompt, response):
    return (torch.as_tensor(response) == torch.as_tensor(prompt).sort().values).sum()


# ================ sort_inclusion_ordering_reward (TASKS.md §10.1) ===================================================

# --- its cases


sort_inclusion_ordering_cases = cases_of("sort_inclusion_ordering_reward")(
    _sort_cases("sort_inclusion_ordering_reward")
)


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


@right("sort_inclusion_ordering_reward")
def lecture_style_generators(prompt, response):
    inclusion_reward = sum(1 for x in prompt if x in response)
    ordering_reward = sum(1 for x, y in zip(response, response[1:]) if x <= y)
    return inclusion_reward + ordering_reward


@right("sort_inclusion_ordering_reward")
def with_isin(prompt, response):
    prompt, response = torch.as_tensor(prompt), torch.as_tensor(response)
    return float(torch.isin(prompt, response).sum() + (response[:-1] <= response[1:]).sum())


@wrong(
    "sort_inclusion_ordering_reward",
    "inclusion counted over the response's entries; count the prompt's entries that occur somewhere in the response",
)
def inclusion_over_the_response(prompt, response):
    prompt, reply = [int(x) for x in prompt], [int(x) for x in response]
    return float(sum(x in prompt for x in reply) + sum(a <= b for a, b in zip(reply, reply[1:])))


@wrong(
    "sort_inclusion_ordering_reward",
    "inclusion counted over distinct numbers (a set); count every prompt entry, a number that occurs twice counts twice",
)
def inclusion_of_distinct_numbers(prompt, response):
    reply = [int(x) for x in response]
    inclusion = len({int(x) for x in prompt} & set(reply))
    return float(inclusion + sum(a <= b for a, b in zip(reply, reply[1:])))


@wrong(
    "sort_inclusion_ordering_reward",
    "inclusion matched copy for copy (a Counter); a prompt entry counts when its number occurs anywhere in the response",
)
def inclusion_matched_copy_for_copy(prompt, response):
    reply = [int(x) for x in response]
    inclusion = sum((Counter(int(x) for x in prompt) & Counter(reply)).values())
    return float(inclusion + sum(a <= b for a, b in zip(reply, reply[1:])))


@wrong(
    "sort_inclusion_ordering_reward",
    "strict < in the ordering term; equal neighbours are in order (response[i] <= response[i + 1])",
)
def strict_ordering(prompt, response):
    reply = [int(x) for x in response]
    return float(sum(int(x) in reply for x in prompt) + sum(a < b for a, b in zip(reply, reply[1:])))


@wrong(
    "sort_inclusion_ordering_reward",
    "ordering counted as the positions that match sorted(prompt) (that is sort_distance_reward); count the adjacent pairs in order",
)
def ordering_as_distance(prompt, response):
    reply = [int(x) for x in response]
    target = sorted(int(x) for x in prompt)
    return float(sum(int(x) in reply for x in prompt) + sum(a == b for a, b in zip(reply, target)))


@wrong(
    "sort_inclusion_ordering_reward",
    "ordering counted over every pair i < j; count only adjacent pairs (response[i], response[i + 1])",
)
def ordering_over_all_pairs(prompt, response):
    reply = [int(x) for x in response]
    ordering = sum(a <= b for i, a in enumerate(reply) for b in reply[i + 1 :])
    return float(sum(int(x) in reply for x in prompt) + ordering)
