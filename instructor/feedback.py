"""What each student reads of their grade: a page per submission, and the words each function gets.

    python -m instructor.grading submissions/*/ --feedback feedback/    # feedback/<submission>.md and .html

Per graded function: its points, its hidden and published passes, and one line saying what to fix with
the TASKS.md section to reread; per outcome gate: pass or fail, the reward the judge measured and the
bar. The same words are the ``output`` of the Gradescope autograder's tests (:mod:`instructor.gradescope`).

What to fix comes from the first failing **published** case when there is one: the very message that
``pytest -m graded`` prints on the student's own machine (its numbers are those of the recorded cases the
release ships). A function that passes every published case but fails hidden ones is told the *kind* of
failure of its first failing hidden case (values, shape, dtype, NaN, gradient, in place, an exception)
and the catalogued mistake its result matches, if any, in fixed words of the grader's, never a
number: the hidden cases' inputs and expected values stay with the grader (their ids and descriptions hold
inputs too, so they are not shown either), and neither does any text of the submission's on them (an
exception's class name or message, a returned string): its code holds the hidden inputs, so such text could
carry them out.
The instructor's own flags (answers fitted to the published cases, similarity) are in the table, not here.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from pathlib import Path

from rlhf_practice.checks import NOT_IMPLEMENTED, check_case
from rlhf_practice.course import GRADED

SECTIONS = {g.function: g.section for g in GRADED}
NAMED = re.compile(r" This matches (?:a common mistake|one of these common mistakes \(they agree on this input\)): ")

# What a hidden failure is told, by the words of its message (rlhf_practice.checks.check_case): the first
# that matches. Only these fixed phrases reach the student, never the message itself: on a hidden case the
# message can quote text the submission controls (an exception's class name and message, a returned string),
# and the submission's code holds the hidden inputs, so any such text could carry them out.
KINDS = (  # first the messages that quote a returned value (a string could hold any words)
    ("expected a torch.Tensor", "it returns something other than a torch.Tensor"),
    ("expected a number", "it returns something other than a Python float"),
    ("expected a tuple of", "it returns the wrong number of results"),
    ("train mode", "it changes the train/eval mode of a model it is given; use the model in the mode it comes in"),
    ("eval mode", "it changes the train/eval mode of a model it is given; use the model in the mode it comes in"),
    ("wrong output shape", "its result has the wrong shape"),
    ("which holds NaN/inf", "its result holds NaN or inf where the right one is finite"),
    ("returned dtype", "its result has the wrong dtype"),
    ("a gradient reached", "a gradient reaches an input that must get none"),
    (
        "carries no gradient",
        "its result carries no gradient where training needs one (do not detach it or compute it under "
        "torch.no_grad())",
    ),
    ("gradient of", "its gradient differs from the right one"),
    ("in place", "it changes one of its inputs in place; compute into new tensors (or work on a copy)"),
)


def _catalogued(case: dict, message: str) -> str:
    """The mistakes of the catalog that ``message`` names ("" if none), kept only where every name is one of
    the case's own catalogued mistakes: grader's words, whatever else the message holds."""
    named = NAMED.split(message, maxsplit=1)
    if len(named) != 2:
        return ""
    known = set(case.get("mistakes", {}))
    for grad in case.get("grads", {}).values():
        known |= set(grad.get("mistakes", {}))
    names = named[1].split(" Reread TASKS.md")[0].removesuffix(".").split("; or ")
    if not all(name in known for name in names):
        return ""
    if len(names) > 1:
        return f" This matches one of these common mistakes (they agree on this input): {'; or '.join(names)}."
    return f" This matches a common mistake: {names[0]}."


DTYPES = frozenset({"float16", "bfloat16", "float32", "float64", "int32", "int64"})


def case_label(case: dict) -> str:
    """A hidden case named by what it tests: the words of its id ("random float32 normalize True",
    "constant advantages negative"), less any that hold a number (a size, a value) other than a dtype's."""
    words = case["id"].removeprefix("hidden_").split("_")
    return " ".join(w for w in words if w in DTYPES or not any(ch.isdigit() for ch in w)) or "a fresh input"


def hidden_diagnosis(case: dict, result: dict) -> str | None:
    """What to fix, told from a failing *hidden* case in fixed words: the kind of failure and the catalogued
    mistake it matches, never a number, a description of the case or any text of the submission's. None if
    the case passes."""
    message = check_case(case, result)
    if message is None:
        return None
    name, reread = case["function"], f"Reread TASKS.md {case['section']}."
    if result["error"] == NOT_IMPLEMENTED:
        return f"{name} is not implemented yet (it raises NotImplementedError). See TASKS.md {case['section']}."
    raises = case.get("raises")
    if raises:
        how = "raises another error" if result["error"] else "returns a value"
        return f"{name} fails a hidden case ({case_label(case)}): on an input where it must raise {raises}, it {how}. {reread}"
    if result["error"]:  # not even which exception: the submission chooses it, and could spell the input with it
        hidden = f"a hidden input ({case_label(case)})"
        return f"{name} raised an exception on {hidden} (which, and its message, are not shown). {reread}"
    kind = next((said for words, said in KINDS if words in message), "its values differ from the right answer")
    return f"{name} fails a hidden case ({case_label(case)}): {kind}.{_catalogued(case, message)} {reread}"


def diagnose(
    cases: list[dict], outcomes: dict, hidden: Callable[[dict], bool], key: Callable[[dict], str]
) -> dict[str, str]:
    """{graded function: what to fix} for each function with a failing case: the first failing published
    case's message, else the first failing hidden case's (:func:`hidden_diagnosis`). ``outcomes`` are the
    child's results by ``key(case)``; a case without one is skipped (the grader notes the crash)."""
    said: dict[str, str] = {}
    for published in (True, False):
        for case in cases:
            function, result = case["function"], outcomes.get(key(case))
            if function in said or hidden(case) == published or not isinstance(result, dict):
                continue
            message = check_case(case, result) if published else hidden_diagnosis(case, result)
            if message:
                said[function] = message
    return said


def _cell(text: str) -> str:
    """Text fit for a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def fix(grade, function: str) -> str:
    """What to fix in ``function``: why its points are capped, if they are (its result cannot train), then its
    diagnosis; where it fails cases without one, that only all-zero answers (or errors) pass; "" when it passes
    everything."""
    capped = grade.capped(function)
    capped += " " * bool(capped)
    if function in grade.diagnoses:
        return capped + grade.diagnoses[function]
    if grade.passed[function] < grade.total[function]:
        return (
            "it gets right only cases whose answer is all zeros (or an error); returning zeros or raising is not an "
            f"implementation. Reread TASKS.md {SECTIONS[function]}."
        )
    return ""


def function_text(grade, function: str) -> str:
    """One function's feedback: points, passes, and what to fix (or that it passes everything)."""
    hidden = f"{grade.passed[function]}/{grade.total[function]}"
    published = f"{grade.published_passed[function]}/{grade.published_total[function]}"
    lines = [
        f"{function} (TASKS.md {SECTIONS[function]}): {grade.points(function):g} of {grade.max_points(function):g} "
        f"points; hidden cases passed {hidden} (the grade), published cases passed {published} (self-check).",
    ]
    if fix(grade, function):
        lines.append(f"What to fix: {fix(grade, function)}")
    return "\n".join(lines)


def gate_text(grade, name: str) -> str:
    """One outcome gate's feedback: pass or fail, what the judge measured against the bar, and why not."""
    from instructor.gate import GATES

    gate, result = next(g for g in GATES if g.name == name), grade.gates[name]
    reward = "nothing to measure" if result.reward is None else f"measured {result.reward:g}"
    line = f"gate/{name}: {result.shown}, {grade.gate_points(name):g} of {gate.points:g} points ({reward}, bar {gate.bar:g})."
    return f"{line}\n{result.note}" if result.note and not result.passed else line


def page(grade, title: str | None = None) -> str:
    """A submission's feedback page, in Markdown."""
    from instructor.gate import GATES

    ran = [g.name for g in GATES if g.name in grade.gates]
    maximum = grade.max_score()
    lines = [
        f"# Feedback: {title or Path(grade.submission).name}",
        "",
        f"**Total: {grade.total_points():g} of {maximum:g} points.**",
        "",
        "Points come from the *hidden* cases: inputs made fresh for this grading, which you do not have. "
        "The *published* cases are the ones `pytest -m graded` runs on your machine: a self-check, worth no "
        "points. A function that fails a published case is told the message pytest prints; one that fails "
        "only hidden cases is told what kind of failure it is, never the hidden inputs or answers.",
        "",
        "| function | TASKS.md | points | hidden passed | published passed | what to fix |",
        "|---|---|---:|---:|---:|---|",
    ]
    for function in grade.functions:
        lines.append(
            f"| {function} | {SECTIONS[function]} | {grade.points(function):g} / {grade.max_points(function):g} | "
            f"{grade.passed[function]}/{grade.total[function]} | "
            f"{grade.published_passed[function]}/{grade.published_total[function]} | {_cell(fix(grade, function)) or '—'} |"
        )
    if ran:
        lines += [
            "",
            "## Outcome gates",
            "",
            "Each gate trains the tiny preset for a few steps with your own functions; a judge that holds none "
            "of your code measures the saved policy. It passes when the measured reward reaches the bar.",
            "",
            "| gate | result | measured | bar | points | note |",
            "|---|---|---:|---:|---:|---|",
        ]
        for gate in (g for g in GATES if g.name in ran):
            result = grade.gates[gate.name]
            measured = "—" if result.reward is None else f"{result.reward:g}"
            note = "" if result.passed else result.note
            lines.append(
                f"| gate/{gate.name} | {result.shown} | {measured} | {gate.bar:g} | "
                f"{grade.gate_points(gate.name):g} / {gate.points:g} | {_cell(note) or '—'} |"
            )
    notes = [n for n in grade.notes if not n.startswith("gate/")]
    if notes:
        lines += ["", "## Notes", "", *(f"- {n}" for n in notes)]
    return "\n".join(lines) + "\n"


def html_page(markdown: str) -> str:
    """The Markdown page as a standalone HTML page (headings, paragraphs, tables, lists: what :func:`page` writes)."""
    body, table = [], []

    def inline(text: str) -> str:
        text = html.escape(text)
        text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text)
        text = re.sub(r"\*(.+?)\*", r"<em>\1</em>", text)
        return re.sub(r"`(.+?)`", r"<code>\1</code>", text)

    def flush() -> None:
        if table:
            rows = [re.split(r"(?<!\\) \| ", row.strip()[2:-2]) for row in table if not set(row) <= set("|-: ")]
            head, *rest = rows
            body.append("<table><tr>" + "".join(f"<th>{inline(c)}</th>" for c in head) + "</tr>")
            for row in rest:
                cells = (inline(c.replace("\\|", "|")) for c in row)
                body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
            body.append("</table>")
            table.clear()

    for line in markdown.splitlines():
        if line.startswith("|"):
            table.append(line)
            continue
        flush()
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            body.append(f"<h{level}>{inline(line[level:].strip())}</h{level}>")
        elif line.startswith("- "):
            body.append(f"<li>{inline(line[2:])}</li>")
        elif line:
            body.append(f"<p>{inline(line)}</p>")
    flush()
    style = "body{font-family:sans-serif;max-width:70em;margin:2em auto}td,th{border:1px solid #ccc;padding:.3em}"
    return (
        f"<!doctype html>\n<html><head><meta charset='utf-8'><title>Feedback</title><style>{style}</style></head>"
        f"<body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def write_pages(folder: Path, grades: list) -> list[Path]:
    """One Markdown and one HTML page per submission in ``folder``, named after the submission's folder
    (``alice.md``, ``alice.html``; alice/rlhf_practice/rl is alice too; a repeated name gets a number); returns
    the Markdown paths."""
    folder.mkdir(parents=True, exist_ok=True)
    written, used = [], set()
    for grade in grades:
        path = Path(grade.submission)
        while path.name in ("rl", "rlhf_practice") and path.parent != path:  # alice/rlhf_practice/rl: alice
            path = path.parent
        stem = re.sub(r"[^\w.-]", "_", path.name) or "submission"
        name, n = stem, 1
        while name in used:
            n += 1
            name = f"{stem}-{n}"
        used.add(name)
        text = page(grade)
        (folder / f"{name}.md").write_text(text, encoding="utf-8")
        (folder / f"{name}.html").write_text(html_page(text), encoding="utf-8")
        written.append(folder / f"{name}.md")
    return written
