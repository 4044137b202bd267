"""The graded checks: run a student function on one recorded case and explain, in words, what differs.

A *case* is one call of a graded function with its expected outcome, recorded from the answer key in
``tests/fixtures/graded/<file>.pt``, one file per student file (``ppo.pt`` holds the cases of the graded
functions of rlhf_practice/rl/ppo.py): a list of plain dicts, loaded with ``weights_only=True``:

    id            short name, unique per function ("book_example", "random_float32_n64_clip0.2", ...)
    function      the graded function ("compute_advantages", ...), section its TASKS.md section
    what          how a failure message names the call
    args, kwargs  the inputs: args is a list of (name, value) pairs, passed positionally; a value is a
                  tensor, a number, a string, a list of ints (the sort rewards take lists) or a small
                  GPT-2 recorded as data (:func:`model_data`: a causal LM or one with a score head,
                  its class, config, weights and train/eval mode, never code), rebuilt by :func:`build_model` before each call
    expected      the expected result: a tensor, a float (a function that returns a Python number), or
                  a list of tensors when the function returns a tuple; then ``outputs`` names them
                  ("advantages", "returns"); None when the call must raise
    raises        None, or the exception the call must raise ("ValueError" for an unknown mode)
    mistakes      {description of a common mistake: what that mistake returns}, for diagnoses; a
                  result that matches several (they agree on this input) is told all of them
    grad_of       names of the inputs that require grad; backward() runs on sum(result * grad_weights)
                  (a model's parameters require grad as they come)
    grad_output   None, or the index of the one part of a tuple result that backward() runs on (the
                  losses of dpo_loss, not the rewards beside them, which may carry gradient or not)
    grads         {input name: {"expected": tensor, "mistakes": {...}, "message": str}}; an all-zero
                  expected gradient means "no gradient may reach this input" and message says why; a
                  model's gradient is that of all its parameters, flattened one after the other
    modes         {name of a model input: whether it must be in train mode after the call}
    unmodified    True: the inputs must be unchanged afterwards
    any_float     (optional) the names of the outputs whose dtype may be any floating one (reward_loss's accuracy,
                  a metric: TRL's is float32 whatever the loss's), compared in the coarser dtype
    stops_training  (optional) the diagnoses among ``mistakes`` that stop training (the grader caps a function
                  whose result matches one: instructor.grading.stops_training)
    atol          None, or the absolute tolerance of this case's value where the contract states one (a tied
                  group's advantages are 0 "to within 0.01"); else the tolerance of the dtype

:func:`run_case` only computes (it is what a grading child process runs on a submission) and
returns plain tensors; :func:`check_case` only compares (the grader's parent process, and the graded
pytest tests, call it). Neither needs the answer key.
"""

from __future__ import annotations

import ast
import copy
import math
import numbers
from collections.abc import Callable
from pathlib import Path

import torch

from rlhf_practice import PACKAGE_DIR
from rlhf_practice.course import MODULES, module_of

CASES_DIR = PACKAGE_DIR.parent / "tests" / "fixtures" / "graded"  # <student file>.pt: its functions' cases
NOT_IMPLEMENTED = "NotImplementedError"


def load_cases(path: Path = CASES_DIR, function: str | None = None) -> list[dict]:
    """The recorded cases (of one function, if given), in the course's order. ``path`` is a folder of one
    file per student file (only the file of ``function`` is read), or one file that holds them all."""
    if path.is_dir():
        modules = MODULES if function is None else (module_of(function),)
        cases = [case for m in modules for case in torch.load(path / f"{m}.pt", weights_only=True)]
    else:
        cases = torch.load(path, weights_only=True)
    return [case for case in cases if function is None or case["function"] == function]


def _plain(value: object) -> object:
    """A tensor result as a plain ``torch.Tensor`` on the CPU, a tuple of tensors as a list of them, a
    real number (an int or a float; not a bool, not a tensor) as a float; anything else as its type name."""
    if type(value) is torch.Tensor:
        return value.detach().cpu().clone()
    if type(value) in (tuple, list) and value and all(type(v) is torch.Tensor for v in value):
        return [_plain(v) for v in value]
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    return type(value).__name__


MODEL_CLASSES = ("GPT2LMHeadModel", "GPT2ForSequenceClassification")  # the model classes a case may hold, as data
MODEL_CONFIG = (
    "vocab_size", "n_positions", "n_embd", "n_layer", "n_head",
    "resid_pdrop", "embd_pdrop", "attn_pdrop", "bos_token_id", "eos_token_id", "pad_token_id",
)  # fmt: skip
HEAD_CONFIG = {"GPT2ForSequenceClassification": ("num_labels",)}  # config fields of a class's head


def model_data(model: torch.nn.Module) -> dict:
    """A GPT2LMHeadModel (a causal LM, task 12) or a GPT2ForSequenceClassification (a reward model with a
    score head, task 13) as plain data that a case can hold and ``torch.load(weights_only=True)`` reads:
    its class, the config fields of :data:`MODEL_CONFIG` (and of its head), the weights, and whether it
    is in train mode."""
    cls = type(model).__name__
    if cls not in MODEL_CLASSES:
        raise TypeError(f"a case may hold a model of {MODEL_CLASSES}, not {cls}")
    state = {name: t.detach().clone() for name, t in model.state_dict().items()}
    if cls == "GPT2LMHeadModel":
        state["lm_head.weight"] = state["transformer.wte.weight"]  # tied, as in GPT-2: saved once
    fields = MODEL_CONFIG + HEAD_CONFIG.get(cls, ())
    return {
        "class": cls,
        "config": {name: getattr(model.config, name) for name in fields},
        "state_dict": state,
        "training": model.training,
    }


def is_model(value: object) -> bool:
    """Whether a case input is a model recorded by :func:`model_data`."""
    return isinstance(value, dict) and value.get("class") in MODEL_CLASSES


def build_model(data: dict) -> torch.nn.Module:
    """The model that :func:`model_data` recorded, rebuilt: the same class, weights and mode on every call."""
    import transformers

    if data["class"] not in MODEL_CLASSES:
        raise TypeError(f"a case may hold a model of {MODEL_CLASSES}, not {data['class']}")
    with torch.random.fork_rng(devices=[]):  # the random initialisation is overwritten: the global RNG stays
        model = getattr(transformers, data["class"])(transformers.GPT2Config(**data["config"]))
    model.load_state_dict(data["state_dict"])
    return model.train(data["training"])


def _copy(value: object) -> object:
    """A fresh copy of an input: the function under test may change it, the case must stay as recorded."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if is_model(value):
        return build_model(value)
    return copy.deepcopy(value) if isinstance(value, list) else value


def fresh_inputs(case: dict) -> dict:
    """{name: a fresh copy of each input of ``case``}, in the order of its arguments; models rebuilt."""
    return {name: _copy(value) for name, value in case["args"]}


def _model_grad(model: torch.nn.Module) -> torch.Tensor | None:
    """The gradient of every parameter, flattened one after the other (0 where none came); None if none came."""
    params = list(model.parameters())
    if all(p.grad is None for p in params):
        return None
    return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).flatten() for p in params])


def _same_input(a: object, b: object) -> bool:
    """Whether an input after the call (``b``) is the one given (``a``): same type, shape, dtype and values."""
    if isinstance(a, torch.Tensor):
        if type(b) is not torch.Tensor or a.shape != b.shape or a.dtype != b.dtype:
            return False
        a = a.detach()
        return bool(((a == b) | (a.isnan() & b.isnan()) if a.is_floating_point() else a == b).all())
    return type(b) is type(a) and a == b


def run_case(fn: Callable, case: dict) -> dict:
    """Call ``fn`` on the case's inputs; return what happened as plain data (no comparison here).

    Returns {"error": None or "Type: message", "output": tensor or type name, "requires_grad": bool,
    "grads": {name: tensor or None}, "after": {name: the input as it is after the call}}: a tensor input's
    values, a list input's copy, a model input's train mode (a bool tensor). Whether the call changed an input
    in place, or a model's mode, is read from "after" by :func:`check_case` (:func:`modified`, :func:`modes`),
    beside the case's own inputs: in the grader, the process that compares, never a verdict of the process that
    ran the student's code.
    """
    args = fresh_inputs(case)
    for name in case["grad_of"]:
        args[name].requires_grad_(True)
    result = {"error": None, "output": None, "requires_grad": False, "grads": {}, "after": {}}
    try:
        with torch.random.fork_rng(devices=[]):  # dropout of a model left in train mode: the same on every call
            torch.manual_seed(0)
            out = fn(*args.values(), **case["kwargs"])
            result["output"] = _plain(out)
            parts = [out] if type(out) is torch.Tensor else list(out) if isinstance(result["output"], list) else []
            if case.get("grad_output") is not None:
                parts = parts[case["grad_output"] : case["grad_output"] + 1]
            parts = [part for part in parts if part.requires_grad]
            result["requires_grad"] = bool(parts)
            if case["grad_of"] and parts:
                weights = case.get("grad_weights")
                sum((part * weights if weights is not None else part).sum() for part in parts).backward()
        result["grads"] = {name: _grad_of_input(args[name]) for name in case["grad_of"]}
    except NotImplementedError:
        result["error"] = NOT_IMPLEMENTED
    except BaseException as err:  # noqa: BLE001 - whatever a submission raises is its own failure
        result["error"] = f"{type(err).__name__}: {err}"
    result["after"] = {name: _after(value) for name, value in args.items() if isinstance(value, _WATCHED)}
    return result


_WATCHED = (torch.Tensor, list, torch.nn.Module)  # the inputs whose state after the call is returned


def _after(value: torch.Tensor | list | torch.nn.Module) -> torch.Tensor | list:
    """An input as it is after the call: a tensor's values, a list's copy, a model's train mode."""
    if isinstance(value, torch.nn.Module):
        return torch.tensor(value.training)
    return value.detach().clone() if isinstance(value, torch.Tensor) else copy.deepcopy(value)


def modified(case: dict, result: dict) -> list[str]:
    """The tensor and list inputs of ``case`` that ``result`` (:func:`run_case`) shows changed by the call: its
    "after" differs from the case's input, or is not there."""
    after = result.get("after", {})
    return [
        name
        for name, value in case["args"]
        if isinstance(value, torch.Tensor | list) and not (name in after and _same_input(value, after[name]))
    ]


def modes(case: dict, result: dict) -> dict[str, bool]:
    """{name of a model input: whether ``result`` shows it in train mode after the call}."""
    after = result.get("after", {})
    return {
        name: bool(after[name])
        for name, value in case["args"]
        if is_model(value) and isinstance(after.get(name), torch.Tensor) and after[name].numel() == 1
    }


def _grad_of_input(value: torch.Tensor | torch.nn.Module) -> torch.Tensor | None:
    if isinstance(value, torch.nn.Module):
        return _model_grad(value)
    return _plain(value.grad) if value.grad is not None else None


def _fmt(t: torch.Tensor, digits: int | None = None, start: int = 0) -> str:
    """A tensor's first 8 values (from flat index ``start``), to 4 significant digits (a 0-dim one to 6), or to
    ``digits``."""
    values = t.detach().double().flatten()[start : start + 8].tolist()
    more = " ..." if t.numel() > start + 8 else ""
    if not t.dim():
        return f"{t.item():.{digits or 6}g}"
    where = f"... from flat index {start}: " if start else ""
    return "[" + where + ", ".join(f"{v:.{digits or 4}g}" for v in values) + more + "]"


def _fmt_both(got: torch.Tensor | float, expected: torch.Tensor | float) -> tuple[str, str]:
    """``got`` and ``expected`` as text, with enough significant digits (up to 10) that they read differently
    where they differ: a difference in the fifth digit is not shown as two equal numbers. Tensors of more than
    8 values are shown from a little before the first value that differs (the cut must not hide it)."""
    start = 0
    if isinstance(expected, torch.Tensor) and got.shape == expected.shape and expected.numel() > 8:
        a, b = got.detach().double().flatten(), expected.detach().double().flatten()
        differs = ~torch.isclose(a, b, equal_nan=True, **_tolerance(expected.dtype))
        first = int(differs.nonzero()[0]) if differs.any() else 0
        start = max(0, first - 2) if first >= 8 else 0
    show = (lambda x, d: _fmt(x, d, start)) if isinstance(expected, torch.Tensor) else (lambda x, d: f"{x:.{d or 6}g}")
    for digits in (None, 6, 8, 10):
        a, b = show(got, digits), show(expected, digits)
        if a != b:
            break
    return a, b


def _tolerance(dtype: torch.dtype) -> dict[str, float]:
    """A check's tolerance for values of ``dtype``: float32's, else float64's."""
    return {"rtol": 1e-4, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-9, "atol": 1e-10}


def _close(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype, atol: float | None = None) -> bool:
    """Equal within the tolerance of ``dtype`` (or within ``atol``, where a case states one); NaN and inf count
    as equal where both hold them."""
    tolerance = _tolerance(dtype)
    if atol is not None:
        tolerance["atol"] = atol
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), equal_nan=True, **tolerance)


def _same_number(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-10) or (math.isnan(a) and math.isnan(b))


def _named(actual: torch.Tensor | float, mistakes: dict, dtype: torch.dtype | None = None) -> str:
    """ " This matches ..." naming every recorded mistake that returns ``actual``; "" if none does.
    ``dtype`` sets the tolerance of a tensor; a number (dtype None) is compared as a float64."""
    same = (lambda wrong: _same_number(actual, wrong)) if dtype is None else (lambda w: _close(actual, w, dtype))
    names = [mistake for mistake, wrong in mistakes.items() if same(wrong)]
    if len(names) > 1:
        return f" This matches one of these common mistakes (they agree on this input): {'; or '.join(names)}."
    return f" This matches a common mistake: {names[0]}." if names else ""


# A result that matches no recorded mistake but lies this much nearer one of them than the answer (the distance
# to the mistake at most NEAREST times the distance to the answer), and at most half as far as from any other, is
# told that mistake as the nearest: two mistakes at once (weights off by one AND ties ignored) match no recorded
# variant, and the student fixes one at a time.
NEAREST = 0.25


def _nearest(actual: torch.Tensor, expected: torch.Tensor, mistakes: dict) -> str:
    """ " It matches no common mistake exactly, ..." naming the recorded mistake far nearer to ``actual`` than the
    answer is (several where they return the same); "" if none is, or two differ and are about as near."""
    a, e = actual.detach().double(), expected.double()
    if a.shape != e.shape or not bool(torch.isfinite(a).all()) or not bool(torch.isfinite(e).all()):
        return ""
    far = float((a - e).norm())
    near = sorted(
        (float((a - w.double()).norm()), i, name)
        for i, (name, w) in enumerate(mistakes.items())
        if type(w) is torch.Tensor and w.shape == a.shape and bool(torch.isfinite(w).all())
    )
    if not near or not far or near[0][0] > NEAREST * far:
        return ""
    best = near[0][0]
    same = [item for item in near if item[0] <= best + 1e-9 * far]  # mistakes that return the same values
    rest = near[len(same) :]
    if rest and rest[0][0] < 2 * best:
        return ""
    names = [name for _, _, name in sorted(same, key=lambda item: item[1])]
    return (
        " It matches no common mistake exactly; it is nearest to "
        + ("this one" if len(names) == 1 else "one of these")
        + f" (there may be a second mistake on top of it): {'; or '.join(names)}."
    )


def _shaped_as(actual: torch.Tensor, mistakes: dict) -> str:
    """ " That is the shape ..." naming the recorded mistakes that return a tensor of ``actual``'s shape and dtype
    where the answer has another shape (a reduction over the wrong dimension); "" if none does."""
    names = [
        name
        for name, w in mistakes.items()
        if type(w) is torch.Tensor and w.shape == actual.shape and w.dtype == actual.dtype
    ]
    return f" That is the shape this common mistake returns: {'; or '.join(names)}." if names else ""


def _compare_number(actual: object, expected: float, what: str, mistakes: dict) -> str | None:
    """:func:`compare` for a function that returns a Python number (an int is a right answer too)."""
    if type(actual) is not float:
        got = actual if isinstance(actual, str) else type(actual).__name__
        hint = ": convert it with float(...) or .item()" if got == "Tensor" else ""
        return f"{what}: returned {got}, expected a number (a Python float){hint}."
    if _same_number(actual, expected):
        return None
    got, want = _fmt_both(actual, expected)
    return f"{what}: got {got}, expected {want}.{_named(actual, mistakes)}"


def compare(
    actual: object,
    expected: torch.Tensor | float,
    what: str,
    mistakes: dict,
    atol: float | None = None,
    any_float: bool = False,
    dtype_rule: str = "",
) -> str | None:
    """None if ``actual`` equals ``expected`` (type, shape, dtype, values; within ``atol`` where given); else
    one sentence saying what differs, naming the recorded ``mistakes`` that return the same (NaN included).
    ``any_float``: any floating dtype will do, compared within the tolerance of the coarser of the two. A result of
    another floating dtype is first compared by value, within the coarser dtype's tolerance: wrong values are told
    before a wrong dtype. ``dtype_rule``: why the answer has its dtype, where it is not an input's (an integer ``n``
    gives float64)."""
    if (
        any_float
        and type(actual) is torch.Tensor
        and actual.is_floating_point()
        and isinstance(expected, torch.Tensor)
        and actual.dtype != expected.dtype
    ):
        coarse = min((actual.dtype, expected.dtype), key=lambda t: torch.finfo(t).bits)
        actual, expected = actual.to(coarse), expected.to(coarse)
        mistakes = {k: v.to(coarse) for k, v in mistakes.items()}
    if isinstance(expected, float):
        return _compare_number(actual, expected, what, mistakes)
    if type(actual) is not torch.Tensor:
        return (
            f"{what}: returned {actual if isinstance(actual, str) else type(actual).__name__}, expected a torch.Tensor."
        )
    if actual.shape != expected.shape:
        extra = ""
        if expected.dim() == 0:
            extra = " The loss must be one number (a 0-dim tensor): take the mean over the batch."
        elif actual.dim() == 0 and expected.dim() == 1:
            extra = " Return one value per row (per pair, per reply), not their mean: the training loop takes it."
        elif actual.numel() == expected.numel():
            extra = " Same number of elements: flatten the result back to the shape of the input."
        elif actual.dtype == torch.bool and expected.dtype != torch.bool:
            extra = " A bool result, one per element: a mask? Return the indices it marks (mask.nonzero().squeeze(1))."
        named = _named(actual, mistakes, expected.dtype) if actual.dtype == expected.dtype else ""
        shape = f"returned shape {tuple(actual.shape)}, expected {tuple(expected.shape)} (wrong output shape)"
        return f"{what}: {shape}.{named or _shaped_as(actual, mistakes) or extra}"
    named = _named(actual, mistakes, expected.dtype) if actual.dtype == expected.dtype else ""
    if not torch.isfinite(actual).all() and torch.isfinite(expected).all():
        # Which step made the NaN is known only when a recorded mistake makes the same one.
        advice = named or (
            " Find the step that makes it (e.g. a division by a zero std without eps, the std of a single"
            " value, exp() of a large number)."
        )
        return f"{what}: returned {_fmt(actual)}, which holds NaN/inf; expected {_fmt(expected)}.{advice}"
    if actual.dtype != expected.dtype and not expected.is_floating_point():
        return f"{what}: returned dtype {actual.dtype}, expected {expected.dtype} (whole numbers: indices, counts or a mask)."
    if actual.dtype != expected.dtype and actual.is_floating_point():
        coarse = min((actual.dtype, expected.dtype), key=lambda t: torch.finfo(t).bits)
        if not _close(actual.to(coarse), expected.to(coarse), coarse, atol):  # the values first, then the dtype
            coarse_mistakes = {k: v.to(coarse) for k, v in mistakes.items() if type(v) is torch.Tensor}
            got, want = _fmt_both(actual, expected)
            named = _named(actual.to(coarse), coarse_mistakes, coarse) or _nearest(actual, expected, mistakes)
            return f"{what}: got {got}, expected {want}.{named}"
    if actual.dtype != expected.dtype:
        why = dtype_rule or "the input's dtype); avoid creating new tensors with a fixed dtype"
        return f"{what}: returned dtype {actual.dtype}, expected {expected.dtype} ({why}."
    if _close(actual, expected, expected.dtype, atol):
        return None
    got, want = _fmt_both(actual, expected)
    return f"{what}: got {got}, expected {want}.{named or _nearest(actual, expected, mistakes)}"


def _compare_output(case: dict, actual: object) -> str | None:
    """:func:`compare` for one result, or for each part of a tuple result (``case["outputs"]``)."""
    names = case.get("outputs")
    if not names:
        return compare(
            actual,
            case["expected"],
            case["what"],
            case["mistakes"],
            case.get("atol"),
            dtype_rule=case.get("dtype_rule", ""),
        )
    if not isinstance(actual, list) or len(actual) != len(names):
        got = f"{len(actual)} tensors" if isinstance(actual, list) else actual
        return f"{case['what']}: returned {got}, expected a tuple of {len(names)} tensors ({', '.join(names)})."
    expected = case["expected"]
    for i, name in enumerate(names):
        # The first part that differs is diagnosed, by the mistakes that get the parts before it right.
        mistakes = {
            k: v[i]
            for k, v in case["mistakes"].items()
            if all(_close(v[j], expected[j], expected[j].dtype) for j in range(i))
        }
        message = compare(
            actual[i], expected[i], f"{case['what']}, {name}", mistakes, any_float=name in case.get("any_float", ())
        )
        if message:
            return message
    return None


def _compare_modes(case: dict, modes: dict) -> str | None:
    """None if every model input ends in the train/eval mode the case expects; else what changed it."""
    for arg, train in case.get("modes", {}).items():
        got, given = modes.get(arg, not train), dict(case["args"])[arg]["training"]  # not shown: changed
        if got == train:
            continue
        if got and given:
            return (
                f"{case['function']} left `{arg}` in train mode, with its dropout on, so its numbers change "
                f"from call to call: put it in eval mode ({arg}.eval()) and leave it there."
            )
        if got:
            return (
                f"{case['function']} switched `{arg}` to train mode ({arg}.train()), which turns its dropout on; "
                "use the model in the mode it comes in."
            )
        return (
            f"{case['function']} switched `{arg}` to eval mode ({arg}.eval()); use the model in the mode it comes "
            "in: the training loop decides (train mode, with its dropout, while the policy trains)."
        )
    return None


def check_case(case: dict, result: dict) -> str | None:
    """None if ``result`` (from :func:`run_case`) is right for ``case``; else the one-line diagnosis."""
    reread = f"Reread TASKS.md {case['section']}."
    name = case["function"]
    if result["error"] == NOT_IMPLEMENTED:
        return f"{name} is not implemented yet (it raises NotImplementedError). See TASKS.md {case['section']}."
    raises = case.get("raises")
    if raises:
        if result["error"] and result["error"].startswith(f"{raises}:"):
            return None
        if result["error"]:
            return f"{name} raised {result['error']}; expected {raises} ({case['what']}). {reread}"
        got = result["output"]
        got = _fmt(got) if isinstance(got, torch.Tensor) else f"{got:g}" if isinstance(got, float) else got
        return f"{case['what']}: returned {got} instead of raising {raises}. {reread}"
    if result["error"]:
        return f"{name} raised {result['error']} ({case['what']}). {reread}"
    message = _compare_modes(case, modes(case, result)) or _compare_output(case, result["output"])
    args = dict(case["args"])
    for arg, grad in case["grads"].items():
        if message:
            break
        must_be_zero = not bool(grad["expected"].abs().sum() > 0)
        got = result["grads"].get(arg)
        where = f"the parameters of `{arg}`" if is_model(args[arg]) else arg
        if must_be_zero:
            if isinstance(got, torch.Tensor) and got.abs().sum() > 0:
                message = f"{name}: a gradient reached {where} ({_fmt(got)}); {grad['message']}."
        elif not result["requires_grad"] or got is None:
            message = (
                f"{name}: the result carries no gradient to {where}; do not compute it under torch.no_grad() "
                "or detach it: training needs that gradient (the loss trains the model through it)."
                if is_model(args[arg])
                else f"{name}: the result carries no gradient to {arg}; do not detach {arg}."
            )
        else:
            what = f"gradient of {name} w.r.t. {arg} ({case['what']})"
            message = compare(got, grad["expected"], what, grad["mistakes"])
    changed = modified(case, result) if case["unmodified"] else []
    if not message and changed:
        arg = changed[0]
        how = (
            "(e.g. with .sort()); work on a copy: sorted(...) returns a new list"
            if isinstance(dict(case["args"])[arg], list)
            else "(e.g. with -=, /= or .sub_()); compute into new tensors"
        )
        message = f"{name} changed its input `{arg}` in place {how}."
    return f"{message} {reread}" if message else None


# A wrong helper is named before its caller. A graded function may call other graded functions of its own
# student file (token_ppo_loss and grpo_clip_loss call masked_mean and per_token_kl; reference_logps calls
# reply_logps). While the student's helper is wrong, the caller's failures are the helper's: their message
# says so first, so that the student fixes the helper and does not hunt for a mistake in the caller that
# the caller's diagnosis would name. "Calls" is read from the student's own source, not declared: a name
# the caller's body uses (a call, or a reference such as ``partial(masked_mean, ...)``). Which helpers fail
# comes from their own cases, run on the same implementation: the pytest plugin runs them
# (tests/_checks.py) and the grader has their outcomes already (instructor.grading); both word it here.


def graded_callees(source: str, function: str, candidates: list[str]) -> list[str]:
    """The functions of ``candidates`` (other graded functions of the same student file, in the course's
    order) whose name the body of ``function`` in ``source`` uses; [] when the source does not parse or
    does not define it at module level."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    body = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function), None)
    if body is None:
        return []
    used = {n.id for n in ast.walk(body) if isinstance(n, ast.Name)}
    used |= {n.attr for n in ast.walk(body) if isinstance(n, ast.Attribute)}
    return [name for name in candidates if name != function and name in used]


def blame_helpers(message: str, function: str, failing: dict[str, str]) -> str:
    """``message`` (a failure of ``function``) led by the helpers it calls that fail their own checks:
    ``failing`` is {helper: its TASKS.md section}, in the course's order."""
    if not failing:
        return message
    one = len(failing) == 1
    helpers = " and ".join(f"your {name}" for name in failing)
    sections = ", ".join(f"TASKS.md {section}" for section in failing.values())
    return (
        f"{function} calls {helpers}, {'which fails its' if one else 'which fail their'} own checks (see "
        f"{'its' if one else 'their'} failures first, {sections}); until {'it passes' if one else 'they pass'}, "
        f"this failure may come from {'it' if one else 'them'}: {message}"
    )
