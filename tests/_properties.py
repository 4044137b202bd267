"""Property tests of the graded functions: laws that every correct implementation obeys, checked with
Hypothesis on many small random inputs, plus float64 central-difference gradient checks.

Each :class:`Property` names its graded function, says the law in words, draws its inputs (a dict of
named values) and checks the law on them: ``check(fn, example)`` returns None when the law holds, or
what ``fn`` did instead. :func:`failure` runs one property against one implementation of its function
and returns the one-line message a student reads (the law, the smallest counterexample Hypothesis
found, the TASKS.md section), or None. tests/test_properties.py runs every property on the
implementation under test (``--impl``).

Functions without a gradient check, and why: :data:`NO_GRADIENT`. reply_logps is checked in float32,
as it returns, along one random direction of the model's parameters; the others with torch's gradcheck.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import strategies as st

from rlhf_practice.course import GRADED, module_of, probe_args

SECTION = {g.function: g.section for g in GRADED}
# The graded functions without a gradient check, and why (every other one has a law named "gradcheck",
# or "gradient" for reply_logps).
NO_GRADIENT = {
    "compute_advantages": "advantages are constants of the loss; the law: no gradient reaches values",
    "compute_group_advantages": "advantages are constants of the loss",
    "compute_gae": "advantages and returns are constants of the loss; the law: no gradient reaches values",
    "compute_deltas": "deltas are constants of the loss",
    "sort_distance_reward": "returns a Python number",
    "sort_inclusion_ordering_reward": "returns a Python number",
    "reference_logps": "the law: nothing requires grad",
}

# Deterministic and quiet: the same examples on every run and machine, no database, no deadline, no
# report but ours. Applied to each property's own search, never loaded as a profile, so it does not
# reach other tests.
SETTINGS = settings(
    max_examples=15,
    derandomize=True,
    database=None,
    deadline=None,
    phases=(Phase.explicit, Phase.generate, Phase.shrink),
    report_multiple_bugs=False,
    suppress_health_check=list(HealthCheck),
    verbosity=Verbosity.quiet,
    print_blob=False,
)
TOL = 1e-6  # float64 inputs: the laws hold to rounding
TIE_TOL = 0.01  # a tie's advantages (deltas) are 0 to within this, in float32 too (DESIGN: the tied-group contract)


@dataclass(frozen=True)
class Property:
    function: str  # the graded function
    name: str  # short id, unique per function (test ids read module-function-name)
    words: str  # the law, as the failure message states it
    inputs: st.SearchStrategy  # draws one example: {input name: value}
    check: Callable[[Callable, dict], str | None]  # None, or what the function did instead
    examples: int = 15

    @property
    def test_id(self) -> str:
        """Its test's id in tests/test_properties.py: student file-function-law."""
        return f"{module_of(self.function)}-{self.function}-{self.name}"


PROPERTIES: list[Property] = []


def law(function: str, name: str, words: str, inputs: st.SearchStrategy, examples: int = 15) -> Callable:
    def register(check: Callable) -> Callable:
        PROPERTIES.append(Property(function, name, words, inputs, check, examples))
        return check

    return register


class _Stub(Exception):
    pass


class _Broken(Exception):
    pass


class _Seen(dict):
    """An example that records which of its inputs a check reads (nested examples too): a counterexample
    shows only those."""

    def __init__(self, data: dict, used: list[str], prefix: str = ""):
        super().__init__(data)
        self._used, self._prefix = used, prefix

    def __getitem__(self, key: str) -> object:
        value = super().__getitem__(key)
        if isinstance(value, dict):
            return _Seen(value, self._used, f"{self._prefix}{key}.")
        if self._prefix + key not in self._used:
            self._used.append(self._prefix + key)
        return value


class _Override:
    """``base`` with some inputs replaced, read as a dict (the reads of ``base`` are still recorded)."""

    def __init__(self, base: dict, change: dict):
        self.base, self.change = base, change

    def __getitem__(self, key: str) -> object:
        return self.change[key] if key in self.change else self.base[key]


def show_used(example: dict, used: list[str]) -> str:
    """The inputs a check read, in the example's order, each as name=value."""
    flat: dict[str, object] = {}

    def walk(d: dict, prefix: str) -> None:
        for k, v in d.items():
            if isinstance(v, dict):
                walk(v, f"{prefix}{k}.")
            else:
                flat[f"{prefix}{k}"] = v

    walk(example, "")
    return ", ".join(f"{path.rsplit('.', 1)[-1]}={fmt(v)}" for path, v in flat.items() if path in used)


def failure(prop: Property, fn: Callable, shrink: bool = True) -> str | None:
    """Run ``prop`` against ``fn`` (an implementation of ``prop.function``): None if the law held on every
    example, else one line naming the function, the law, the smallest counterexample and the section.
    Without ``shrink`` the counterexample is the first one found (the same verdict, found sooner: for
    counting what the laws catch, not for showing a student)."""
    phases = SETTINGS.phases if shrink else tuple(p for p in SETTINGS.phases if p is not Phase.shrink)

    @settings(SETTINGS, max_examples=prop.examples, phases=phases)
    @given(prop.inputs)
    def search(example: dict) -> None:
        used: list[str] = []
        with warnings.catch_warnings():  # e.g. the std of one value: its NaN is the failure we report
            warnings.simplefilter("ignore")
            try:
                seen = prop.check(fn, _Seen(example, used))
            except NotImplementedError:
                raise _Stub() from None
            except _Broken as err:  # a helper found the result unusable (wrong type or shape)
                seen = str(err)
            except Exception as err:  # noqa: BLE001 - whatever the function raises is its failure
                seen = f"raised {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        if seen:
            raise _Broken(f"{show_used(example, used)} -> {seen}")

    section = SECTION[prop.function]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(*probe_args(next(g for g in GRADED if g.function == prop.function)))
    except NotImplementedError:  # a stub: say so at once, without a search
        return f"{prop.function} is not implemented yet (it raises NotImplementedError). See TASKS.md {section}."
    except Exception:  # noqa: BLE001, S110 - the search below reports what is wrong
        pass
    try:
        search()
    except _Stub:
        return f"{prop.function} is not implemented yet (it raises NotImplementedError). See TASKS.md {section}."
    except _Broken as err:
        found = "smallest counterexample" if shrink else "counterexample"
        return f"{prop.function} ({section}): {prop.words}; {found}: {err}. Reread TASKS.md {section}."
    except Exception as err:  # noqa: BLE001 - e.g. Hypothesis's FlakyFailure: a result that changes from call to call
        return (
            f"{prop.function} ({section}): {prop.words}; it broke this law on an input and then kept it on the same "
            f"input ({type(err).__name__}): does it use randomness or state kept between calls? Reread TASKS.md {section}."
        )
    return None


# --- how a counterexample is shown --------------------------------------------------------------------


def fmt(value: object) -> str:
    if isinstance(value, torch.Tensor):
        if value.dim() == 0:
            return f"{value.item():.4g}"
        if value.is_floating_point():
            rows = value.detach().double().tolist()
            return str(_rounded(rows)).replace("'", "")
        return str(value.tolist())
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return "{" + show(value) + "}"
    return repr(value)


def _rounded(x: object) -> object:
    return [_rounded(v) for v in x] if isinstance(x, list) else f"{x:.4g}"


def show(example: dict) -> str:
    return ", ".join(f"{k}={fmt(v)}" for k, v in example.items())


def close(a: object, b: torch.Tensor, tol: float = TOL) -> bool:
    return (
        isinstance(a, torch.Tensor)
        and a.shape == b.shape
        and bool(torch.allclose(a.detach().double(), b.double(), rtol=tol, atol=tol))
    )


def got(a: object) -> str:
    return f"got {fmt(a)}" if isinstance(a, torch.Tensor) else f"returned {type(a).__name__}"


# --- input strategies -------------------------------------------------------------------------------

DTYPES = st.sampled_from([torch.float32, torch.float64])
# Rewards for a tie: values whose float32 mean over a group is an ulp off (1.4 over 8, 12.4 over 3 or 6, ...), so
# that rounding alone does not make the tie's advantages 0, then any value.
TIE_VALUES = st.sampled_from([1.4, 12.4, 0.6, 100.3, 0.4, 1 / 3]) | st.floats(-20, 20, allow_nan=False)


def floats(lo: float = -3.0, hi: float = 3.0) -> st.SearchStrategy:
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False)


def tensor(shape: tuple[int, ...], lo: float = -3.0, hi: float = 3.0) -> st.SearchStrategy:
    n = math.prod(shape)
    return st.lists(floats(lo, hi), min_size=n, max_size=n).map(
        lambda xs: torch.tensor(xs, dtype=torch.float64).reshape(shape)
    )


def response_mask(rows: int, cols: int, least: int = 0) -> st.SearchStrategy:
    """(rows, cols) float64 mask, each row ones then zeros (a reply's real tokens, then padding)."""
    lengths = st.lists(st.integers(least, cols), min_size=rows, max_size=rows)
    return lengths.map(lambda ls: (torch.arange(cols) < torch.tensor(ls)[:, None]).double())


def unchanged(fn: Callable, args: tuple) -> str | None:
    """Call ``fn(*args)``; the name of the first input it changed in place (tensor, list or model mode), else None."""
    before = [
        a.detach().clone() if isinstance(a, torch.Tensor) else list(a) if isinstance(a, list) else a for a in args
    ]
    out = fn(*args)
    for i, (b, a) in enumerate(zip(before, args)):
        if isinstance(a, torch.Tensor) and not torch.equal(b, a.detach()):
            return f"argument {i + 1} was changed in place to {fmt(a)}"
        if isinstance(a, list) and b != a:
            return f"argument {i + 1} was changed in place to {a}"
    for part in out if isinstance(out, tuple) else (out,):
        if isinstance(part, torch.Tensor) and part.is_floating_point() and part.dtype != torch.float64:
            return f"returned dtype {part.dtype} for float64 inputs (keep the input's dtype)"
    return None


def each_row(fn: Callable, args: list, rows: int) -> list:
    """``fn`` called on each row of the batch alone: every tensor argument cut to row i (kept 2-D), the rest as is."""
    return [fn(*(a[i : i + 1] if isinstance(a, torch.Tensor) else a for a in args)) for i in range(rows)]


def raises_value_error(call: Callable[[], object]) -> str | None:
    """None when ``call()`` raises ValueError (an unknown mode argument), else what it returned instead."""
    try:
        out = call()
    except ValueError:
        return None
    return f"{got(out)} instead of raising ValueError"


def gradcheck(f: Callable, inputs: list[torch.Tensor], names: str) -> str | None:
    """torch.autograd.gradcheck of ``f`` at ``inputs`` (float64); None if autograd agrees with central differences."""
    leaves = [x.detach().clone().requires_grad_(True) for x in inputs]
    out = f(*leaves)
    parts = out if isinstance(out, tuple) else (out,)
    if not any(isinstance(p, torch.Tensor) and p.requires_grad for p in parts):
        return f"the result carries no gradient to {names}"
    try:
        torch.autograd.gradcheck(f, leaves, eps=1e-6, atol=1e-5, rtol=1e-4)
    except Exception as err:  # noqa: BLE001 - gradcheck's GradcheckError, or a failure inside f
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        numerical = next((line for line in lines if line.startswith("numerical")), "")
        analytical = next((line for line in lines if line.startswith("analytical")), "")
        detail = f" ({numerical}; {analytical})" if numerical else f" ({lines[0] if lines else type(err).__name__})"
        return f"autograd's gradient w.r.t. {names} differs from float64 central differences{detail}".replace(
            "tensor(", "("
        )
    return None


def away_from(x: torch.Tensor, points: list[float], gap: float = 1e-3) -> bool:
    """No element of ``x`` within ``gap`` of a kink (the central differences straddle it)."""
    return all(bool(((x - p).abs() > gap).all()) for p in points)


# --- compute_advantages (§1.2) -------------------------------------------------------------------------

_pair = st.integers(2, 6).flatmap(lambda n: st.fixed_dictionaries({"rewards": tensor((n,)), "values": tensor((n,))}))


@law("compute_advantages", "no_normalize", "with normalize=False the advantages are rewards - values", _pair)
def _(fn, ex):
    a = fn(ex["rewards"], ex["values"], False)
    return None if close(a, ex["rewards"] - ex["values"]) else got(a)


@law(
    "compute_advantages",
    "normalized",
    "with normalize=True the advantages have mean 0 and std 1 (unbiased) and keep the order of rewards - values",
    _pair.filter(lambda ex: (ex["rewards"] - ex["values"]).std() > 0.1),
)
def _(fn, ex):
    d = ex["rewards"] - ex["values"]
    a = fn(ex["rewards"], ex["values"], True)
    if not isinstance(a, torch.Tensor) or a.shape != d.shape:
        return got(a)
    ordered = all(bool(a[i] > a[j]) for i in range(len(d)) for j in range(len(d)) if d[i] > d[j] + 1e-6)
    if abs(a.mean().item()) > TOL or abs(a.std().item() - 1) > 1e-5 or not ordered:
        return f"got {fmt(a)} (mean {a.mean().item():.4g}, std {a.std().item():.4g})"
    return None


@law(
    "compute_advantages",
    "equal_gives_zeros",
    "when every reply has the same rewards - values, the normalized advantages are 0 (to within 0.01), not NaN, "
    "in float32 too",
    st.fixed_dictionaries({"reward": TIE_VALUES, "value": st.just(0.0) | floats()}),
)
def _(fn, ex):
    for dtype in (torch.float32, torch.float64):
        for n in (2, 3, 6, 8, 64):
            r, v = torch.full((n,), ex["reward"], dtype=dtype), torch.full((n,), ex["value"], dtype=dtype)
            a = fn(r, v, True)
            if not close(a, torch.zeros(n, dtype=dtype), TIE_TOL):
                return f"{n} replies in {dtype}: {got(a)}"
    return None


@law(
    "compute_advantages",
    "no_gradient_to_values",
    "no gradient reaches values (they come from the value head with gradient)",
    st.fixed_dictionaries({"ex": _pair, "normalize": st.booleans()}),
)
def _(fn, ex):
    r, v = ex["ex"]["rewards"], ex["ex"]["values"].clone().requires_grad_(True)
    a = fn(r, v, ex["normalize"])
    if not a.requires_grad:
        return None
    (grad,) = torch.autograd.grad((a * torch.arange(1.0, len(a) + 1, dtype=a.dtype)).sum(), v, allow_unused=True)
    return None if grad is None or not grad.abs().sum() > 0 else f"a gradient {fmt(grad)} reached values"


@law(
    "compute_advantages",
    "inputs_unchanged",
    "the inputs stay unchanged and a float64 input gives a float64 result",
    st.fixed_dictionaries({"ex": _pair, "normalize": st.booleans()}),
)
def _(fn, ex):
    return unchanged(fn, (ex["ex"]["rewards"], ex["ex"]["values"], ex["normalize"]))


def _olds(new: str, old: str, inside: bool = False, values: bool = False) -> Callable[[dict], dict]:
    """Turn the drawn "log_ratio" (and "value_step") into the old inputs a function takes: old = new - log_ratio.
    ``inside``: squeeze every ratio (and value step) inside its clip range first."""

    def convert(ex: dict) -> dict:
        lr = ex["log_ratio"]
        if inside:
            lr = torch.log1p(torch.tanh(lr) * ex["clip_range"] * 0.99)
        out = {k: v for k, v in ex.items() if k not in ("log_ratio", "value_step")}
        out[old] = ex[new] - lr
        if values:
            step = ex["value_step"]
            if inside:
                step = torch.tanh(step) * ex["clip_range_value"] * 0.99
            out["old_values"] = ex["new_values"] - step
        return out

    return convert


def _ratio(ex: dict, new: str, old: str) -> torch.Tensor:
    return torch.exp(ex[new] - ex[old])


# --- ppo_clip_loss (§2.2) -----------------------------------------------------------------------------


def _ppo_inputs(spread: float, inside: bool = False) -> st.SearchStrategy:
    return (
        st.integers(1, 5)
        .flatmap(
            lambda n: st.fixed_dictionaries(
                {
                    "new_logprobs": tensor((n,), -5, 0),
                    "log_ratio": tensor((n,), -spread, spread),
                    "advantages": tensor((n,)),
                    "clip_range": floats(0.05, 0.5),
                }
            )
        )
        .map(_olds("new_logprobs", "old_logprobs", inside))
    )


def _ppo_args(ex: dict) -> tuple:
    return ex["new_logprobs"], ex["old_logprobs"], ex["advantages"], ex["clip_range"]


@law(
    "ppo_clip_loss",
    "inside_clip_is_unclipped",
    "when every ratio lies inside [1 - clip_range, 1 + clip_range] the loss is the unclipped -mean(ratio * A), one number",
    _ppo_inputs(1.0, inside=True),
)
def _(fn, ex):
    new, old, adv, eps = _ppo_args(ex)
    loss = fn(new, old, adv, eps)
    expected = -(torch.exp(new - old) * ex["advantages"]).mean()
    return None if close(loss, expected) else f"{got(loss)}, expected {fmt(expected)}"


@law(
    "ppo_clip_loss",
    "pessimistic",
    "the loss is at least both -mean(ratio * A) and -mean(clamp(ratio, 1 - clip_range, 1 + clip_range) * A) (min of the two terms)",
    _ppo_inputs(1.0),
)
def _(fn, ex):
    new, old, adv, eps = _ppo_args(ex)
    loss = fn(new, old, adv, eps)
    ratio = torch.exp(new - old)
    bound = max(-(ratio * adv).mean().item(), -(ratio.clamp(1 - eps, 1 + eps) * adv).mean().item())
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0 or loss.item() < bound - TOL:
        return f"{got(loss)}, below {bound:.4g}"
    return None


@law(
    "ppo_clip_loss",
    "shift_invariant",
    "adding the same large negative constant to new and old log-probs (sums over a reply: -300 in float32 is -800 in float64) changes nothing",
    st.fixed_dictionaries({"ex": _ppo_inputs(1.0), "shift": floats(-900, -760)}),
)
def _(fn, ex):
    new, old, adv, eps = _ppo_args(ex["ex"])
    base, shifted = fn(new, old, adv, eps), fn(new + ex["shift"], old + ex["shift"], adv, eps)
    return None if close(shifted, base.detach(), 1e-5) else f"{got(shifted)} instead of {fmt(base)}"


@law(
    "ppo_clip_loss",
    "batch_order",
    "the loss does not depend on the order of the batch",
    _ppo_inputs(1.0).flatmap(
        lambda ex: st.permutations(range(len(ex["advantages"]))).map(lambda p: {**ex, "order": p})
    ),
)
def _(fn, ex):
    new, old, adv, eps = _ppo_args(ex)
    p = list(ex["order"])
    a, b = fn(new, old, adv, eps), fn(new[p], old[p], adv[p], eps)
    return None if close(b, a.detach()) else f"{got(b)} after reordering, {fmt(a)} before"


@law(
    "ppo_clip_loss",
    "gradient_at_ratio_one",
    "at new_logprobs == old_logprobs the gradient w.r.t. new_logprobs is -A / N",
    _ppo_inputs(0.0),
)
def _(fn, ex):
    new = ex["new_logprobs"].clone().requires_grad_(True)
    loss = fn(new, ex["new_logprobs"].clone(), ex["advantages"], ex["clip_range"])
    if not loss.requires_grad:
        return "the loss carries no gradient to new_logprobs"
    (grad,) = torch.autograd.grad(loss, new)
    expected = -ex["advantages"] / len(new)
    return None if close(grad, expected) else f"gradient {fmt(grad)}, expected {fmt(expected)}"


@law(
    "ppo_clip_loss",
    "gradcheck",
    "autograd's gradient w.r.t. new_logprobs equals float64 central differences",
    _ppo_inputs(1.0).filter(
        lambda ex: away_from(_ratio(ex, "new_logprobs", "old_logprobs"), [1 - ex["clip_range"], 1 + ex["clip_range"]])
    ),
    examples=10,
)
def _(fn, ex):
    _, old, adv, eps = _ppo_args(ex)
    return gradcheck(lambda new: fn(new, old, adv, eps), [ex["new_logprobs"]], "new_logprobs")


@law(
    "ppo_clip_loss",
    "inputs_unchanged",
    "the inputs stay unchanged and a float64 input gives a float64 result",
    _ppo_inputs(1.0),
)
def _(fn, ex):
    return unchanged(fn, _ppo_args(ex))


# --- compute_group_advantages (§3.2) ------------------------------------------------------------------

_groups = st.tuples(st.integers(1, 3), st.integers(2, 4)).flatmap(
    lambda bk: st.fixed_dictionaries(
        {"rewards": tensor((bk[0] * bk[1],)), "group_size": st.just(bk[1]), "normalize": st.booleans()}
    )
)


def _spread(ex: dict) -> bool:
    return bool((ex["rewards"].view(-1, ex["group_size"]).std(dim=1) > 0.1).all())


@law(
    "compute_group_advantages",
    "groups_sum_to_zero",
    "the advantages of each group sum to 0 (one advantage per reply, same shape as rewards)",
    _groups,
)
def _(fn, ex):
    a = fn(ex["rewards"], ex["group_size"], ex["normalize"])
    if not isinstance(a, torch.Tensor) or a.shape != ex["rewards"].shape:
        return got(a)
    sums = a.view(-1, ex["group_size"]).sum(dim=1)
    return None if close(sums, torch.zeros_like(sums), 1e-5) else f"{got(a)}: group sums {fmt(sums)}"


@law(
    "compute_group_advantages",
    "shuffle_within_group",
    "shuffling the replies inside a group shuffles their advantages the same way",
    _groups.flatmap(lambda ex: st.permutations(range(ex["group_size"])).map(lambda p: {**ex, "order": p})),
)
def _(fn, ex):
    k, n = ex["group_size"], len(ex["rewards"])
    p = [g + i for g in range(0, n, k) for i in ex["order"]]
    a, b = fn(ex["rewards"], k, ex["normalize"]), fn(ex["rewards"][p], k, ex["normalize"])
    return None if close(b, a[p].detach()) else f"{got(b)} after shuffling, {fmt(a)} before"


@law(
    "compute_group_advantages",
    "normalized_per_group",
    "with normalize=True each group's advantages have std 1 (the group's own unbiased std) and keep the order of its rewards",
    _groups.filter(_spread).map(lambda ex: {**ex, "normalize": True}),
)
def _(fn, ex):
    k = ex["group_size"]
    a = fn(ex["rewards"], k, True)
    if not isinstance(a, torch.Tensor) or a.shape != ex["rewards"].shape:
        return got(a)
    a_g, r_g = a.view(-1, k), ex["rewards"].view(-1, k)
    std = a_g.std(dim=1)
    ordered = all(
        bool(a_g[g, i] > a_g[g, j])
        for g in range(len(r_g))
        for i in range(k)
        for j in range(k)
        if r_g[g, i] > r_g[g, j] + 1e-6
    )
    return None if close(std, torch.ones_like(std), 1e-5) and ordered else f"{got(a)} (group stds {fmt(std)})"


@law(
    "compute_group_advantages",
    "centred_scales",
    "with normalize=False, scaling every reward by c scales the advantages by c, and a larger reward gets a larger advantage within its group",
    st.fixed_dictionaries(
        {"ex": _groups.filter(_spread).map(lambda ex: {**ex, "normalize": False}), "c": floats(0.5, 3.0)}
    ),
)
def _(fn, ex):
    r, k, c = ex["ex"]["rewards"], ex["ex"]["group_size"], ex["c"]
    a, b = fn(r, k, False), fn(c * r, k, False)
    if not close(b, c * a.detach()):
        return f"{got(b)} for rewards x {c:.4g}, {fmt(a)} for the rewards"
    a_g, r_g = a.view(-1, k), r.view(-1, k)
    for g in range(len(r_g)):
        for i in range(k):
            for j in range(k):
                if r_g[g, i] > r_g[g, j] + 1e-6 and not a_g[g, i] > a_g[g, j]:
                    return f"{got(a)}: a larger reward got a smaller advantage"
    return None


@law(
    "compute_group_advantages",
    "equal_group_gives_zeros",
    "a group whose rewards are all equal gets advantages 0 (to within 0.01), not NaN, whatever the value, in float32 "
    "too, alone or beside other groups",
    st.fixed_dictionaries({"value": TIE_VALUES, "others": tensor((2, 8)), "where": st.integers(0, 2)}),
)
def _(fn, ex):
    for dtype in (torch.float32, torch.float64):
        for k in (3, 6, 8):
            for beside in (False, True):
                groups = [ex["others"][0, :k], ex["others"][1, :k]] if beside else []
                g = min(ex["where"], len(groups))
                groups.insert(g, torch.full((k,), ex["value"], dtype=torch.float64))
                r = torch.cat(groups).to(dtype)
                for normalize in (True, False):
                    a = fn(r, k, normalize)
                    if not isinstance(a, torch.Tensor) or a.shape != r.shape or not torch.isfinite(a).all():
                        return f"groups of {k} in {dtype}, normalize={normalize}: {got(a)}"
                    if not close(a[g * k : (g + 1) * k], torch.zeros(k, dtype=dtype), TIE_TOL):
                        return f"group {g} tied, groups of {k} in {dtype}, normalize={normalize}: {got(a)}"
    return None


@law(
    "compute_group_advantages",
    "inputs_unchanged",
    "the inputs stay unchanged and a float64 input gives a float64 result",
    _groups,
)
def _(fn, ex):
    return unchanged(fn, (ex["rewards"], ex["group_size"], ex["normalize"]))


# --- grpo_loss (§3.3) ---------------------------------------------------------------------------------

_grpo = st.integers(1, 6).flatmap(
    lambda n: st.fixed_dictionaries({"logprobs": tensor((n,), -8, 0), "advantages": tensor((n,))})
)


@law("grpo_loss", "gradient", "the loss is one number whose gradient w.r.t. logprobs is -A / N", _grpo)
def _(fn, ex):
    lp = ex["logprobs"].clone().requires_grad_(True)
    loss = fn(lp, ex["advantages"])
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        return f"{got(loss)}, expected one number"
    if not loss.requires_grad:
        return "the loss carries no gradient to logprobs"
    (grad,) = torch.autograd.grad(loss, lp)
    expected = -ex["advantages"] / len(lp)
    return None if close(grad, expected) else f"gradient {fmt(grad)}, expected {fmt(expected)}"


@law(
    "grpo_loss",
    "zero_sum_shift",
    "with advantages that sum to 0 (as group advantages do), adding a constant to every log-prob changes nothing",
    st.fixed_dictionaries({"ex": _grpo, "shift": floats(-5, 5)}),
)
def _(fn, ex):
    lp, adv = ex["ex"]["logprobs"], ex["ex"]["advantages"]
    adv = adv - adv.mean()
    a, b = fn(lp, adv), fn(lp + ex["shift"], adv)
    return None if close(b, a.detach(), 1e-5) else f"{got(b)} after the shift, {fmt(a)} before"


@law("grpo_loss", "odd_in_advantages", "negating every advantage negates the loss", _grpo)
def _(fn, ex):
    a, b = fn(ex["logprobs"], ex["advantages"]), fn(ex["logprobs"], -ex["advantages"])
    return None if close(b, -a.detach()) else f"{got(b)} for -A, {fmt(a)} for A"


@law(
    "grpo_loss",
    "no_gradient_to_advantages",
    "no gradient reaches advantages (they are constants of the update)",
    _grpo,
)
def _(fn, ex):
    adv = ex["advantages"].clone().requires_grad_(True)
    loss = fn(ex["logprobs"].clone().requires_grad_(True), adv)
    if not loss.requires_grad:
        return None
    (grad,) = torch.autograd.grad(loss.sum(), adv, allow_unused=True)
    return None if grad is None or not grad.abs().sum() > 0 else f"a gradient {fmt(grad)} reached advantages"


@law(
    "grpo_loss",
    "batch_order",
    "the loss does not depend on the order of the batch",
    _grpo.flatmap(lambda ex: st.permutations(range(len(ex["logprobs"]))).map(lambda p: {**ex, "order": p})),
)
def _(fn, ex):
    p = list(ex["order"])
    a, b = fn(ex["logprobs"], ex["advantages"]), fn(ex["logprobs"][p], ex["advantages"][p])
    return None if close(b, a.detach()) else f"{got(b)} after reordering, {fmt(a)} before"


@law("grpo_loss", "gradcheck", "autograd's gradient w.r.t. logprobs equals float64 central differences", _grpo, 10)
def _(fn, ex):
    adv = ex["advantages"]
    return gradcheck(lambda lp: fn(lp, adv), [ex["logprobs"]], "logprobs")


@law("grpo_loss", "inputs_unchanged", "the inputs stay unchanged and a float64 input gives a float64 result", _grpo)
def _(fn, ex):
    return unchanged(fn, (ex["logprobs"], ex["advantages"]))


# --- masked_mean (§7.2) -------------------------------------------------------------------------------

_shape = st.tuples(st.integers(1, 3), st.integers(1, 4))
_masked = _shape.flatmap(
    lambda s: st.fixed_dictionaries(
        {
            "values": tensor(s),
            "mask": response_mask(*s),
            "other": tensor(s),
            "dim": st.sampled_from([None, 1]),
            "pad": st.integers(1, 2),
        }
    )
)


def _pad(x: torch.Tensor, cols: int, fill: float = 0.0) -> torch.Tensor:
    """``x`` with ``cols`` more columns of ``fill`` on the right (padding)."""
    return torch.cat([x, torch.full((x.shape[0], cols), fill, dtype=x.dtype)], dim=1)


@law(
    "masked_mean",
    "ignores_masked_values",
    "the values where mask is 0 do not change the result",
    _masked,
)
def _(fn, ex):
    v, m = ex["values"], ex["mask"]
    a, b = fn(v, m, ex["dim"]), fn(torch.where(m > 0, v, ex["other"]), m, ex["dim"])
    return None if close(b, a.detach()) else f"{got(b)} with other padding values, {fmt(a)} before"


@law(
    "masked_mean",
    "padding_columns",
    "appending padding columns (mask 0) changes nothing",
    _masked,
)
def _(fn, ex):
    v, m, k = ex["values"], ex["mask"], ex["pad"]
    a, b = fn(v, m, ex["dim"]), fn(_pad(v, k, 5.0), _pad(m, k), ex["dim"])
    return None if close(b, a.detach()) else f"{got(b)} with {k} padding columns, {fmt(a)} without"


@law(
    "masked_mean",
    "one_mean_over_tokens",
    "with dim=None it is one mean over every real token of the batch (0 when there is none), one number",
    _masked,
)
def _(fn, ex):
    v, m = ex["values"], ex["mask"]
    out = fn(v, m, None)
    count = m.sum()
    expected = (v * m).sum() / count if count > 0 else torch.zeros((), dtype=v.dtype)
    return None if close(out, expected) else f"{got(out)}, expected {fmt(expected)}"


@law(
    "masked_mean",
    "per_row",
    "with dim=1 it gives one mean per row; an all-masked row gives 0 (not NaN) and a finite gradient",
    _masked,
)
def _(fn, ex):
    v, m = ex["values"].clone().requires_grad_(True), ex["mask"]
    out = fn(v, m, 1)
    if not isinstance(out, torch.Tensor) or out.shape != (v.shape[0],):
        return f"{got(out)}, expected shape ({v.shape[0]},)"
    empty = m.sum(dim=1) == 0
    if not torch.isfinite(out).all() or not (out.detach()[empty] == 0).all():
        return got(out)
    if out.requires_grad:
        (grad,) = torch.autograd.grad(out.sum(), v)
        if not torch.isfinite(grad).all():
            return f"gradient {fmt(grad)}"
    return None


@law(
    "masked_mean",
    "gradcheck",
    "autograd's gradient w.r.t. values equals float64 central differences",
    _masked,
    examples=10,
)
def _(fn, ex):
    m, dim = ex["mask"], ex["dim"]
    return gradcheck(lambda v: fn(v, m, dim), [ex["values"]], "values")


@law("masked_mean", "inputs_unchanged", "the inputs stay unchanged and a float64 input gives a float64 result", _masked)
def _(fn, ex):
    return unchanged(fn, (ex["values"], ex["mask"], ex["dim"]))


# --- per_token_kl (§7.3) ------------------------------------------------------------------------------

_kl = _shape.flatmap(
    lambda s: st.fixed_dictionaries(
        {
            "logprobs": tensor(s, -4, 0),
            "ref_logprobs": tensor(s, -4, 0),
            "mask": response_mask(*s),
            "estimator": st.sampled_from(["k1", "k3"]),
        }
    )
)


@law(
    "per_token_kl",
    "k3_nonnegative",
    "k3 is >= 0 at every token, 0 where logprobs == ref_logprobs and > 0 on a real token where they differ",
    _kl,
)
def _(fn, ex):
    lp, ref, m = ex["logprobs"], ex["ref_logprobs"], ex["mask"]
    kl = fn(lp, ref, m, "k3")
    if not isinstance(kl, torch.Tensor) or kl.shape != lp.shape:
        return got(kl)
    differ = ((lp - ref).abs() > 1e-3) & (m > 0)
    same = fn(lp, lp.clone(), m, "k3")
    if (kl < -TOL).any() or (kl[differ] <= 0).any() or not close(same, torch.zeros_like(lp)):
        return f"{got(kl)} (and {fmt(same)} for ref_logprobs = logprobs)"
    return None


@law(
    "per_token_kl",
    "k1_is_log_ratio",
    "k1 is the log-ratio log(pi / pi_ref) = logprobs - ref_logprobs on real tokens (swapping the two negates it)",
    _kl,
)
def _(fn, ex):
    lp, ref, m = ex["logprobs"], ex["ref_logprobs"], ex["mask"]
    kl = fn(lp, ref, m, "k1")
    expected = (lp - ref) * m
    return None if close(kl, expected) else f"{got(kl)}, expected {fmt(expected)}"


@law(
    "per_token_kl",
    "unbiased_over_vocabulary",
    "over a whole vocabulary, the pi-weighted mean of k1 and of k3 both equal KL(pi || pi_ref)",
    st.integers(2, 5).flatmap(
        lambda v: st.fixed_dictionaries({"logits": tensor((1, v)), "ref_logits": tensor((1, v))})
    ),
)
def _(fn, ex):
    lp, ref = torch.log_softmax(ex["logits"], -1), torch.log_softmax(ex["ref_logits"], -1)
    kl = (lp.exp() * (lp - ref)).sum()
    for estimator in ("k1", "k3"):
        out = fn(lp, ref, torch.ones_like(lp), estimator)
        if not isinstance(out, torch.Tensor) or out.shape != lp.shape:
            return f"{estimator}: {got(out)}"
        mean = (lp.exp() * out).sum()
        if abs(mean.item() - kl.item()) > 1e-6:
            return f"{estimator}: {fmt(out)}, whose pi-weighted mean is {mean.item():.4g}, not KL = {kl.item():.4g}"
    return None


@law("per_token_kl", "masked_positions_zero", "masked positions get KL 0 (both estimators)", _kl)
def _(fn, ex):
    lp, ref, m = ex["logprobs"], ex["ref_logprobs"], ex["mask"]
    kl = fn(lp, ref, m, ex["estimator"])
    if not isinstance(kl, torch.Tensor) or kl.shape != lp.shape:
        return got(kl)
    return None if (kl.detach()[m == 0] == 0).all() else got(kl)


@law(
    "per_token_kl",
    "unknown_estimator_raises",
    "an estimator other than 'k1' or 'k3' raises ValueError",
    st.fixed_dictionaries({"ex": _kl, "estimator": st.sampled_from(["k2", "K3", "kl", ""])}),
    examples=8,
)
def _(fn, ex):
    return raises_value_error(
        lambda: fn(ex["ex"]["logprobs"], ex["ex"]["ref_logprobs"], ex["ex"]["mask"], ex["estimator"])
    )


@law(
    "per_token_kl",
    "gradcheck",
    "autograd's gradient w.r.t. logprobs equals float64 central differences",
    _kl,
    examples=10,
)
def _(fn, ex):
    ref, m, e = ex["ref_logprobs"], ex["mask"], ex["estimator"]
    return gradcheck(lambda lp: fn(lp, ref, m, e), [ex["logprobs"]], "logprobs")


@law("per_token_kl", "inputs_unchanged", "the inputs stay unchanged and a float64 input gives a float64 result", _kl)
def _(fn, ex):
    return unchanged(fn, (ex["logprobs"], ex["ref_logprobs"], ex["mask"], ex["estimator"]))


# --- compute_gae (§8.2) -------------------------------------------------------------------------------

_gae = _shape.flatmap(
    lambda s: st.fixed_dictionaries(
        {
            "rewards": tensor(s),
            "values": tensor(s),
            "mask": response_mask(*s),
            "gamma": floats(0.0, 1.0),
            "lam": floats(0.0, 1.0),
            "other": tensor(s),
            "pad": st.integers(1, 2),
        }
    )
)


def _gae_args(ex: dict) -> tuple:
    return ex["rewards"], ex["values"], ex["mask"], ex["gamma"], ex["lam"]


def _pair_out(out: object, shape: torch.Size) -> str | None:
    if not isinstance(out, tuple | list) or len(out) != 2:
        return f"{got(out)}, expected (advantages, returns)"
    if any(not isinstance(x, torch.Tensor) or x.shape != shape for x in out):
        return f"returned shapes {[tuple(x.shape) if isinstance(x, torch.Tensor) else x for x in out]}, expected two of {tuple(shape)}"
    return None


@law(
    "compute_gae",
    "returns_to_go",
    "with gamma = lam = 1 the advantage of a real token is the sum of the reply's rewards from it to the end minus V_t",
    _gae,
)
def _(fn, ex):
    r, v, m = ex["rewards"], ex["values"], ex["mask"]
    out = fn(r, v, m, 1.0, 1.0)
    if bad := _pair_out(out, r.shape):
        return bad
    to_go = (r * m).flip(1).cumsum(1).flip(1)
    expected = (to_go - v) * m
    return None if close(out[0], expected) else f"advantages {fmt(out[0])}, expected {fmt(expected)}"


@law(
    "compute_gae",
    "recursion",
    "on every real token A_t = r_t + gamma * V_{t+1} - V_t + gamma * lam * A_{t+1}, with V and A taken as 0 after the reply's last real token",
    _gae,
)
def _(fn, ex):
    r, v, m, gamma, lam = _gae_args(ex)
    out = fn(r, v, m, gamma, lam)
    if bad := _pair_out(out, r.shape):
        return bad
    a = out[0].detach()
    nxt = lambda x: torch.cat([x[:, 1:] * m[:, 1:], torch.zeros_like(x[:, :1])], dim=1)  # noqa: E731
    residual = (a - (r + gamma * nxt(v) - v + gamma * lam * nxt(a))) * m
    return None if close(residual, torch.zeros_like(a)) else f"advantages {fmt(a)}"


@law(
    "compute_gae",
    "returns_are_a_plus_v",
    "returns = advantages + values on real tokens, and both are 0 on padding",
    _gae,
)
def _(fn, ex):
    r, v, m, gamma, lam = _gae_args(ex)
    out = fn(r, v, m, gamma, lam)
    if bad := _pair_out(out, r.shape):
        return bad
    a, ret = (x.detach() for x in out)
    if close(ret, (a + v) * m) and close(a, a * m):
        return None
    return f"advantages {fmt(a)}, returns {fmt(ret)}"


@law(
    "compute_gae",
    "padding_changes_nothing",
    "rewards and values under padding, and extra padding columns, change nothing",
    _gae,
)
def _(fn, ex):
    r, v, m, gamma, lam = _gae_args(ex)
    k, other = ex["pad"], ex["other"]
    base = fn(r, v, m, gamma, lam)
    if bad := _pair_out(base, r.shape):
        return bad
    r2, v2 = _pad(torch.where(m > 0, r, other), k, 1.0), _pad(torch.where(m > 0, v, -other), k, 1.0)
    padded = fn(r2, v2, _pad(m, k), gamma, lam)
    if bad := _pair_out(padded, r2.shape):
        return bad
    for name, x, y in zip(("advantages", "returns"), base, padded):
        if not close(y.detach(), _pad(x.detach(), k)):
            return f"{name} {fmt(y)} with other padding, {fmt(x)} before"
    return None


@law(
    "compute_gae",
    "no_gradient_to_values",
    "no gradient reaches values through advantages or returns",
    _gae,
)
def _(fn, ex):
    r, v, m, gamma, lam = _gae_args(ex)
    v = v.clone().requires_grad_(True)
    out = fn(r, v, m, gamma, lam)
    parts = [x for x in out if isinstance(x, torch.Tensor) and x.requires_grad]
    if not parts:
        return None
    (grad,) = torch.autograd.grad(sum((x * torch.rand_like(x).add(0.5)).sum() for x in parts), v, allow_unused=True)
    return None if grad is None or not grad.abs().sum() > 0 else f"a gradient {fmt(grad)} reached values"


@law("compute_gae", "inputs_unchanged", "the inputs stay unchanged and a float64 input gives a float64 result", _gae)
def _(fn, ex):
    return unchanged(fn, _gae_args(ex))


# --- token_ppo_loss (§8.3) ----------------------------------------------------------------------------

_tppo = _shape.flatmap(
    lambda s: st.fixed_dictionaries(
        {
            "new_logprobs": tensor(s, -4, 0),
            "log_ratio": tensor(s, -0.6, 0.6),
            "advantages": tensor(s),
            "new_values": tensor(s),
            "value_step": tensor(s, -1, 1),
            "returns": tensor(s),
            "mask": response_mask(*s),
            "clip_range": floats(0.05, 0.4),
            "clip_range_value": floats(0.05, 0.5),
            "pad": st.integers(1, 2),
        }
    )
)
_tppo_inside = _tppo.map(_olds("new_logprobs", "old_logprobs", inside=True, values=True))
_tppo = _tppo.map(_olds("new_logprobs", "old_logprobs", values=True))


def _tppo_args(ex: dict) -> tuple:
    return (
        ex["new_logprobs"],
        ex["old_logprobs"],
        ex["advantages"],
        ex["new_values"],
        ex["old_values"],
        ex["returns"],
        ex["mask"],
        ex["clip_range"],
        ex["clip_range_value"],
    )


def _mm(x: torch.Tensor, m: torch.Tensor) -> float:
    return ((x * m).sum() / m.sum().clamp(min=1)).item()


def _two(out: object) -> str | None:
    if (
        not isinstance(out, tuple | list)
        or len(out) != 2
        or any(not isinstance(x, torch.Tensor) or x.dim() for x in out)
    ):
        return f"{got(out)}, expected (policy_loss, value_loss), two numbers"
    return None


@law(
    "token_ppo_loss",
    "pessimistic",
    "policy_loss is at least the masked mean of -ratio * A and of -clamp(ratio) * A; value_loss at least the masked mean of each squared error",
    _tppo,
)
def _(fn, ex):
    new, old, adv, nv, ov, ret, m, eps, eps_v = _tppo_args(ex)
    out = fn(new, old, adv, nv, ov, ret, m, eps, eps_v)
    if bad := _two(out):
        return bad
    ratio = torch.exp(new - old)
    policy_bound = max(_mm(-ratio * adv, m), _mm(-ratio.clamp(1 - eps, 1 + eps) * adv, m))
    clipped_v = ov + (nv - ov).clamp(-eps_v, eps_v)
    value_bound = max(_mm((nv - ret) ** 2, m), _mm((clipped_v - ret) ** 2, m))
    if out[0].item() < policy_bound - TOL or out[1].item() < value_bound - TOL:
        return f"({fmt(out[0])}, {fmt(out[1])}), below the bounds ({policy_bound:.4g}, {value_bound:.4g})"
    return None


@law(
    "token_ppo_loss",
    "inside_clip_ranges",
    "when every ratio and value step lies inside its clip range, the losses are masked means of -ratio * A and (new_values - returns)^2",
    _tppo_inside,
)
def _(fn, ex):
    new, old, adv, nv, ov, ret, m, eps, eps_v = _tppo_args(ex)
    out = fn(new, old, adv, nv, ov, ret, m, eps, eps_v)
    if bad := _two(out):
        return bad
    expected = (_mm(-torch.exp(new - old) * adv, m), _mm((nv - ret) ** 2, m))
    if abs(out[0].item() - expected[0]) > TOL or abs(out[1].item() - expected[1]) > TOL:
        return f"({fmt(out[0])}, {fmt(out[1])}), expected ({expected[0]:.4g}, {expected[1]:.4g})"
    return None


@law(
    "token_ppo_loss",
    "token_weighted_rows",
    "both losses of a batch are the means over its real tokens: each row's loss weighted by its number of real tokens",
    _tppo,
)
def _(fn, ex):
    args = _tppo_args(ex)
    m = ex["mask"]
    out = fn(*args)
    if bad := _two(out):
        return bad
    counts = m.sum(dim=1)
    if counts.sum() == 0:
        return None
    rows = each_row(fn, args, len(m))
    for j, name in enumerate(("policy_loss", "value_loss")):
        expected = sum(c.item() * r[j].item() for c, r in zip(counts, rows)) / counts.sum().item()
        if abs(out[j].item() - expected) > TOL:
            return f"{name} {fmt(out[j])}, but the rows' losses {[round(r[j].item(), 4) for r in rows]} weighted by their real tokens give {expected:.4g}"
    return None


@law(
    "token_ppo_loss",
    "padding_changes_nothing",
    "values under padding, and extra padding columns, change neither loss",
    _tppo,
)
def _(fn, ex):
    args = _tppo_args(ex)
    m, k = ex["mask"], ex["pad"]
    base = fn(*args)
    if bad := _two(base):
        return bad
    padded = [_pad(torch.where(m > 0, a, a + 1.5), k, 0.7) if i < 6 else a for i, a in enumerate(args)]
    padded[6] = _pad(m, k)
    out = fn(*padded)
    if bad := _two(out):
        return bad
    if close(out[0], base[0].detach()) and close(out[1], base[1].detach()):
        return None
    return f"({fmt(out[0])}, {fmt(out[1])}) with other padding, ({fmt(base[0])}, {fmt(base[1])}) before"


@law(
    "token_ppo_loss",
    "shift_invariant",
    "adding the same large negative constant to new and old log-probs (very unlikely tokens: -150 in float32 is -800 in float64) changes neither loss",
    st.fixed_dictionaries({"ex": _tppo, "shift": floats(-900, -760)}),
)
def _(fn, ex):
    args = list(_tppo_args(ex["ex"]))
    base = fn(*args)
    args[0], args[1] = args[0] + ex["shift"], args[1] + ex["shift"]
    out = fn(*args)
    if bad := _two(base) or _two(out):
        return bad
    if close(out[0], base[0].detach(), 1e-5) and close(out[1], base[1].detach(), 1e-5):
        return None
    return f"({fmt(out[0])}, {fmt(out[1])}) after the shift, ({fmt(base[0])}, {fmt(base[1])}) before"


@law(
    "token_ppo_loss",
    "gradcheck",
    "autograd's gradients w.r.t. new_logprobs and new_values equal float64 central differences",
    _tppo.filter(
        lambda ex: (
            away_from(_ratio(ex, "new_logprobs", "old_logprobs"), [1 - ex["clip_range"], 1 + ex["clip_range"]])
            and away_from(ex["new_values"] - ex["old_values"], [-ex["clip_range_value"], ex["clip_range_value"]])
            and away_from(ex["old_values"] - ex["returns"], [0.0])
        )
    ),
    examples=10,
)
def _(fn, ex):
    _, old, adv, _, ov, ret, m, eps, eps_v = _tppo_args(ex)
    return gradcheck(
        lambda new, nv: tuple(fn(new, old, adv, nv, ov, ret, m, eps, eps_v)),
        [ex["new_logprobs"], ex["new_values"]],
        "new_logprobs and new_values",
    )


@law(
    "token_ppo_loss", "inputs_unchanged", "the inputs stay unchanged and a float64 input gives a float64 result", _tppo
)
def _(fn, ex):
    return unchanged(fn, _tppo_args(ex))


# --- grpo_clip_loss (§9.2) ----------------------------------------------------------------------------

_gclip = _shape.flatmap(
    lambda s: st.fixed_dictionaries(
        {
            "logprobs": tensor(s, -4, 0),
            "log_ratio": tensor(s, -0.6, 0.6),
            "ref_logprobs": tensor(s, -4, 0),
            "advantages": tensor(s[:1]),
            "mask": response_mask(*s),
            "clip_range": floats(0.05, 0.4),
            "beta": floats(0.0, 0.5),
            "loss_type": st.sampled_from(["grpo", "dapo", "dr_grpo"]),
            "max_tokens": st.integers(s[1], 6),
            "pad": st.integers(1, 2),
        }
    )
).map(_olds("logprobs", "old_logprobs"))


def _gclip_args(ex: dict, **change: object) -> tuple:
    ex = _Override(ex, change)
    return (
        ex["logprobs"],
        ex["old_logprobs"],
        ex["ref_logprobs"],
        ex["advantages"],
        ex["mask"],
        ex["clip_range"],
        ex["beta"],
        ex["loss_type"],
        ex["max_tokens"],
    )


def _reduce(x: torch.Tensor, m: torch.Tensor, loss_type: str, max_tokens: int) -> float:
    if loss_type == "grpo":
        return ((x * m).sum(1) / m.sum(1).clamp(min=1)).mean().item()
    if loss_type == "dapo":
        return _mm(x, m)
    return ((x * m).sum() / (m.shape[0] * max_tokens)).item()


def _number(out: object) -> str | None:
    return None if isinstance(out, torch.Tensor) and out.dim() == 0 else f"{got(out)}, expected one number"


@law(
    "grpo_clip_loss",
    "reference_only_in_kl",
    "with beta = 0 the loss does not depend on ref_logprobs (the ratio is against old_logprobs)",
    _gclip,
)
def _(fn, ex):
    a = fn(*_gclip_args(ex, beta=0.0))
    b = fn(*_gclip_args(ex, beta=0.0, ref_logprobs=ex["ref_logprobs"] - 1.0))
    if bad := _number(a) or _number(b):
        return bad
    return None if close(b, a.detach()) else f"{got(b)} with ref_logprobs - 1, {fmt(a)} before"


@law(
    "grpo_clip_loss",
    "pessimistic",
    "with beta = 0 the loss is at least the loss_type's reduction of -ratio * A and of -clamp(ratio) * A",
    _gclip,
)
def _(fn, ex):
    lp, old, _, adv, m, eps, _, loss_type, max_tokens = _gclip_args(ex)
    out = fn(*_gclip_args(ex, beta=0.0))
    if bad := _number(out):
        return bad
    ratio, a = torch.exp(lp - old), adv[:, None]
    bound = max(
        _reduce(-ratio * a, m, loss_type, max_tokens),
        _reduce(-ratio.clamp(1 - eps, 1 + eps) * a, m, loss_type, max_tokens),
    )
    return None if out.item() >= bound - TOL else f"{got(out)}, below {bound:.4g}"


@law(
    "grpo_clip_loss",
    "kl_grows_with_beta",
    "a larger beta never lowers the loss, and raises it when logprobs and ref_logprobs differ on a real token",
    st.fixed_dictionaries({"ex": _gclip, "more": floats(0.1, 1.0)}),
)
def _(fn, ex):
    e = ex["ex"]
    a, b = fn(*_gclip_args(e)), fn(*_gclip_args(e, beta=e["beta"] + ex["more"]))
    if bad := _number(a) or _number(b):
        return bad
    differ = bool((((e["logprobs"] - e["ref_logprobs"]).abs() > 0.05) & (e["mask"] > 0)).any())
    if b.item() < a.item() - TOL or (differ and b.item() <= a.item() + 1e-9):
        return f"{fmt(a)} at beta {e['beta']:.4g}, {fmt(b)} at beta {e['beta'] + ex['more']:.4g}"
    return None


@law(
    "grpo_clip_loss",
    "rows_decompose",
    "the loss of a batch is the mean of its rows' losses ('grpo', 'dr_grpo') or their mean weighted by real tokens ('dapo'); row i's advantage belongs to row i",
    _gclip,
)
def _(fn, ex):
    args = _gclip_args(ex)
    m, loss_type = ex["mask"], ex["loss_type"]
    out = fn(*args)
    if bad := _number(out):
        return bad
    rows = [r.item() for r in each_row(fn, args, len(m))]
    weights = m.sum(dim=1).tolist() if loss_type == "dapo" else [1.0] * len(m)
    if sum(weights) == 0:
        return None
    expected = sum(w * r for w, r in zip(weights, rows)) / sum(weights)
    return (
        None
        if abs(out.item() - expected) <= TOL
        else f"{got(out)}, but its rows alone give {[round(r, 4) for r in rows]}"
    )


@law(
    "grpo_clip_loss",
    "padding_changes_nothing",
    "values under padding, and extra padding columns, change nothing",
    _gclip,
)
def _(fn, ex):
    m, k = ex["mask"], ex["pad"]
    base = fn(*_gclip_args(ex))
    if bad := _number(base):
        return bad
    change = {
        name: _pad(torch.where(m > 0, ex[name], ex[name] - 1.3 + 0.5 * i), k, -0.4 + 0.2 * i)
        for i, name in enumerate(("logprobs", "old_logprobs", "ref_logprobs"))
    }
    out = fn(*_gclip_args(ex, mask=_pad(m, k), **change))
    return None if close(out, base.detach()) else f"{got(out)} with other padding, {fmt(base)} before"


@law(
    "grpo_clip_loss",
    "shift_invariant",
    "adding the same large negative constant to logprobs, old_logprobs and ref_logprobs (very unlikely tokens: -150 in float32 is -800 in float64) changes nothing",
    st.fixed_dictionaries({"ex": _gclip, "shift": floats(-900, -760)}),
)
def _(fn, ex):
    e, shift = ex["ex"], ex["shift"]
    base = fn(*_gclip_args(e))
    names = ("logprobs", "old_logprobs", "ref_logprobs")
    out = fn(*_gclip_args(e, **{name: e[name] + shift for name in names}))
    if bad := _number(base) or _number(out):
        return bad
    return None if close(out, base.detach(), 1e-5) else f"{got(out)} after the shift, {fmt(base)} before"


@law(
    "grpo_clip_loss",
    "unknown_loss_type_raises",
    "a loss_type other than 'grpo', 'dapo' or 'dr_grpo' raises ValueError",
    st.fixed_dictionaries({"ex": _gclip, "loss_type": st.sampled_from(["bnpo", "GRPO", "mean", ""])}),
    examples=8,
)
def _(fn, ex):
    return raises_value_error(lambda: fn(*_gclip_args(ex["ex"], loss_type=ex["loss_type"])))


@law(
    "grpo_clip_loss",
    "gradcheck",
    "autograd's gradient w.r.t. logprobs equals float64 central differences (all-masked rows included)",
    _gclip.filter(
        lambda ex: away_from(_ratio(ex, "logprobs", "old_logprobs"), [1 - ex["clip_range"], 1 + ex["clip_range"]])
    ),
    examples=10,
)
def _(fn, ex):
    _, old, ref, adv, m, eps, beta, loss_type, max_tokens = _gclip_args(ex)
    return gradcheck(
        lambda lp: fn(lp, old, ref, adv, m, eps, beta, loss_type, max_tokens), [ex["logprobs"]], "logprobs"
    )


@law(
    "grpo_clip_loss", "inputs_unchanged", "the inputs stay unchanged and a float64 input gives a float64 result", _gclip
)
def _(fn, ex):
    return unchanged(fn, _gclip_args(ex))


# --- the two sort rewards (§10.1): Python numbers, no gradient -----------------------------------------

_sort = (
    st.integers(1, 6)
    .flatmap(
        lambda n: st.fixed_dictionaries(
            {
                "prompt": st.lists(st.integers(0, 5), min_size=n, max_size=n),
                "response": st.lists(st.integers(0, 5), min_size=n, max_size=n),
            }
        )
    )
    .flatmap(lambda ex: st.permutations(range(len(ex["prompt"]))).map(lambda p: {**ex, "order": p}))
)


def _number_in(out: object, hi: int) -> str | None:
    if not isinstance(out, int | float) or isinstance(out, bool):
        return f"returned {type(out).__name__}, expected a Python number (a float; an int is fine too)"
    return None if 0 <= out <= hi else f"returned {out:g}, outside [0, {hi}]"


def _sort_laws_of_both(function: str, most: Callable[[int], int]) -> None:
    """The laws both sort rewards obey; ``most(n)`` is the reward's largest value for n numbers."""

    @law(
        function,
        "prompt_order_irrelevant",
        "reordering the prompt changes nothing (only its sorted version matters)",
        _sort,
    )
    def _(fn, ex):
        prompt, response = ex["prompt"], ex["response"]
        a, b = fn(list(prompt), list(response)), fn([prompt[i] for i in ex["order"]], list(response))
        return None if a == b else f"{b!r} for the reordered prompt, {a!r} before"

    @law(
        function,
        "inputs_unchanged",
        "prompt and response stay unchanged (as lists and as tensors), and the result is a Python number",
        _sort,
    )
    def _(fn, ex):
        prompt, response = list(ex["prompt"]), list(ex["response"])
        if bad := unchanged(fn, (prompt, response)):
            return bad
        out = fn(torch.tensor(ex["prompt"]), torch.tensor(ex["response"]))
        return _number_in(out, most(len(prompt)))


@law(
    "sort_distance_reward",
    "sorted_prompt_scores_n",
    "the sorted prompt scores n, whatever the prompt's order, and any other response scores less (a number in [0, n])",
    _sort,
)
def _(fn, ex):
    prompt, response = ex["prompt"], ex["response"]
    n, target = len(prompt), sorted(prompt)
    best = fn(list(prompt), list(target))
    if best != float(n):
        return f"sorted(prompt) scored {best!r}, expected {float(n)}"
    out = fn(list(prompt), list(response))
    if bad := _number_in(out, n):
        return bad
    return None if response == target or out < n else f"{response} scored {out:g}, the maximum"


@law(
    "sort_distance_reward",
    "position_by_position",
    "the right numbers in another order score only the positions where they match sorted(prompt)",
    _sort,
)
def _(fn, ex):
    target = sorted(ex["prompt"])
    shuffled = [target[i] for i in ex["order"]]
    expected = float(sum(x == y for x, y in zip(shuffled, target)))
    out = fn(list(ex["prompt"]), shuffled)
    return None if out == expected else f"response {shuffled} scored {out!r}, expected {expected:g}"


_sort_laws_of_both("sort_distance_reward", lambda n: n)


@law(
    "sort_inclusion_ordering_reward",
    "sorted_prompt_scores_max",
    "the sorted prompt scores 2n - 1, whatever the prompt's order (every reward a number in [0, 2n - 1])",
    _sort,
)
def _(fn, ex):
    prompt, n = ex["prompt"], len(ex["prompt"])
    best = fn(list(prompt), sorted(prompt))
    if best != float(2 * n - 1):
        return f"sorted(prompt) scored {best!r}, expected {float(2 * n - 1)}"
    return _number_in(fn(list(prompt), list(ex["response"])), 2 * n - 1)


@law(
    "sort_inclusion_ordering_reward",
    "sorted_response",
    "a sorted response (ties allowed) scores n - 1 for ordering plus one for every prompt entry it contains (duplicates each count)",
    _sort,
)
def _(fn, ex):
    prompt, response = ex["prompt"], sorted(ex["response"])
    n = len(prompt)
    expected = float(n - 1 + sum(x in response for x in prompt))
    out = fn(list(prompt), response)
    return None if out == expected else f"{response} scored {out!r}, expected {expected}"


_sort_laws_of_both("sort_inclusion_ordering_reward", lambda n: 2 * n - 1)


# --- compute_deltas (§10.2) ---------------------------------------------------------------------------

MODES = ["rewards", "centered_rewards", "normalized_rewards", "max_rewards"]
_reward = st.one_of(st.sampled_from([0.0, 0.5, 1.0]), floats())  # ties are common in rewards
_deltas = st.tuples(st.integers(1, 3), st.integers(2, 4)).flatmap(
    lambda s: st.fixed_dictionaries(
        {
            "rewards": st.lists(_reward, min_size=s[0] * s[1], max_size=s[0] * s[1]).map(
                lambda xs: torch.tensor(xs, dtype=torch.float64).view(s)
            ),
            "mode": st.sampled_from(MODES),
            "shift": floats(),
            "scale": floats(0.5, 3.0),
        }
    )
)


@law(
    "compute_deltas",
    "rows_independent",
    "each row (prompt) gets the same deltas alone as in the batch, in every mode",
    _deltas,
)
def _(fn, ex):
    r, mode = ex["rewards"], ex["mode"]
    out = fn(r, mode)
    if not isinstance(out, torch.Tensor) or out.shape != r.shape:
        return got(out)
    for i in range(len(r)):
        alone = fn(r[i : i + 1].clone(), mode)
        if not close(alone, out[i : i + 1].detach()):
            return f"{mode}: row {i} alone gets {fmt(alone)}, in the batch {fmt(out[i])}"
    return None


@law(
    "compute_deltas",
    "centred_modes",
    "centered and normalized rows sum to 0; a normalized row of unequal rewards has std 1 (up to the 1e-5); rewards comes back as is",
    _deltas,
)
def _(fn, ex):
    r = ex["rewards"]
    same = fn(r, "rewards")
    if not close(same, r):
        return f"rewards: {got(same)}"
    for mode in ("centered_rewards", "normalized_rewards"):
        out = fn(r, mode)
        if not isinstance(out, torch.Tensor) or out.shape != r.shape:
            return f"{mode}: {got(out)}"
        if not close(out.sum(dim=1), torch.zeros(len(r), dtype=r.dtype), 1e-5):
            return f"{mode}: {got(out)}, whose rows do not sum to 0"
    out = fn(r, "normalized_rewards")
    for i in range(len(r)):
        std = r[i].std().item()
        if std > 0.1 and abs(out[i].std().item() - std / (std + 1e-5)) > 1e-5:
            return f"normalized_rewards: {got(out)}, row {i} has std {out[i].std().item():.4g}"
    return None


@law(
    "compute_deltas",
    "centered_shift_and_scale",
    "centered_rewards: adding c to every reward changes nothing, multiplying them by c multiplies the deltas by c",
    _deltas,
)
def _(fn, ex):
    r, c, s = ex["rewards"], ex["shift"], ex["scale"]
    base = fn(r, "centered_rewards")
    shifted, scaled = fn(r + c, "centered_rewards"), fn(r * s, "centered_rewards")
    if not close(shifted, base.detach(), 1e-5):
        return f"{got(shifted)} for rewards + {c:.4g}, {fmt(base)} before"
    return (
        None if close(scaled, s * base.detach(), 1e-5) else f"{got(scaled)} for rewards x {s:.4g}, {fmt(base)} before"
    )


@law(
    "compute_deltas",
    "max_keeps_the_maxima",
    "max_rewards: every reply that reaches its row's maximum keeps its reward, every other reply gets 0",
    _deltas,
)
def _(fn, ex):
    r = ex["rewards"]
    out = fn(r, "max_rewards")
    best = r.max(dim=1, keepdim=True).values
    expected = torch.where(r == best, r, torch.zeros_like(r))
    return None if close(out, expected) else f"{got(out)}, expected {fmt(expected)}"


@law(
    "compute_deltas",
    "equal_row_gives_zeros",
    "a row of equal rewards gives deltas 0 (to within 0.01), not NaN, in the centered and normalized modes, whatever "
    "the value, in float32 too",
    st.fixed_dictionaries({"value": TIE_VALUES}),
)
def _(fn, ex):
    for dtype in (torch.float32, torch.float64):
        for trials in (3, 6, 8):
            r = torch.full((1, trials), ex["value"], dtype=dtype)
            for mode in MODES[1:3]:
                out = fn(r, mode)
                if not close(out, torch.zeros_like(r), TIE_TOL):
                    return f"{mode}, {trials} trials in {dtype}: {got(out)}"
    return None


@law(
    "compute_deltas",
    "unknown_mode_raises",
    "a mode other than the four raises ValueError",
    st.fixed_dictionaries({"ex": _deltas, "mode": st.sampled_from(["centered", "max", "normalized", ""])}),
    examples=8,
)
def _(fn, ex):
    return raises_value_error(lambda: fn(ex["ex"]["rewards"], ex["mode"]))


@law(
    "compute_deltas",
    "inputs_unchanged",
    "the rewards stay unchanged and a float64 input gives a float64 result",
    _deltas,
)
def _(fn, ex):
    return unchanged(fn, (ex["rewards"], ex["mode"]))


# --- compute_loss (§10.3) -----------------------------------------------------------------------------

LOSS_MODES = ["naive", "unclipped", "clipped"]
_loss = (
    st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 3))
    .flatmap(
        lambda s: st.fixed_dictionaries(
            {
                "log_probs": tensor(s, -4, 0),
                "log_ratio": tensor(s, -0.5, 0.5),
                "deltas": tensor(s[:2]),
                "mode": st.sampled_from(LOSS_MODES),
                "clip_range": floats(0.02, 0.3),
                "ratio": floats(0.5, 1.5),
                "shift": floats(-900, -760),
                "order": st.permutations(range(s[1])),
            }
        )
    )
    .map(_olds("log_probs", "old_log_probs"))
)


def _loss_args(ex: dict) -> tuple:
    return ex["log_probs"], ex["deltas"], ex["mode"], ex["old_log_probs"], ex["clip_range"]


@law(
    "compute_loss",
    "on_policy_gradient",
    "on-policy (old_log_probs=None) every mode's gradient w.r.t. log_probs is -delta / (batch * trial * pos) at each position",
    _loss,
)
def _(fn, ex):
    lp = ex["log_probs"].clone().requires_grad_(True)
    loss = fn(lp, ex["deltas"], ex["mode"])
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        return f"{ex['mode']}: {got(loss)}, expected one number"
    if not loss.requires_grad:
        return f"{ex['mode']}: the loss carries no gradient to log_probs"
    (grad,) = torch.autograd.grad(loss, lp)
    expected = (-ex["deltas"][..., None] / lp.numel()).expand_as(lp)
    return None if close(grad, expected) else f"{ex['mode']}: gradient {fmt(grad)}, expected {fmt(expected)}"


@law(
    "compute_loss",
    "constant_ratio",
    "when every ratio exp(log_probs - old_log_probs) equals r, unclipped is -r * mean(delta) and clipped -mean(min(r * delta, clamp(r) * delta))",
    _loss,
)
def _(fn, ex):
    lp, deltas, r, eps = ex["log_probs"], ex["deltas"], ex["ratio"], ex["clip_range"]
    old = lp - math.log(r)
    for mode in ("unclipped", "clipped"):
        out = fn(lp, deltas, mode, old, eps)
        rc = min(max(r, 1 - eps), 1 + eps)
        expected = (
            -r * deltas.mean().item() if mode == "unclipped" else -torch.minimum(r * deltas, rc * deltas).mean().item()
        )
        if _number(out) or abs(out.item() - expected) > TOL:
            return f"{mode}: {got(out)}, expected {expected:.4g}"
    return None


@law(
    "compute_loss",
    "clipped_not_below_unclipped",
    "the clipped loss is never below the unclipped loss for the same inputs",
    _loss,
)
def _(fn, ex):
    lp, deltas, _, old, eps = _loss_args(ex)
    clipped, unclipped = fn(lp, deltas, "clipped", old, eps), fn(lp, deltas, "unclipped", old, eps)
    if bad := _number(clipped) or _number(unclipped):
        return bad
    return None if clipped.item() >= unclipped.item() - TOL else f"clipped {fmt(clipped)} < unclipped {fmt(unclipped)}"


@law(
    "compute_loss",
    "shift_invariant",
    "unclipped and clipped: adding the same large negative constant (-300 in float32 is -800 in float64) to log_probs and old_log_probs changes nothing",
    _loss,
)
def _(fn, ex):
    lp, deltas, mode, old, eps = _loss_args(ex)
    mode = "clipped" if mode == "naive" else mode
    a, b = fn(lp, deltas, mode, old, eps), fn(lp + ex["shift"], deltas, mode, old + ex["shift"], eps)
    return None if close(b, a.detach(), 1e-5) else f"{mode}: {got(b)} after the shift, {fmt(a)} before"


@law(
    "compute_loss",
    "mean_over_entries",
    "the loss is a mean over every [batch, trial, pos] entry: repeating each reply's positions, or the whole batch, changes nothing",
    _loss,
)
def _(fn, ex):
    lp, deltas, mode, old, eps = _loss_args(ex)
    base = fn(lp, deltas, mode, old, eps)
    longer = fn(torch.cat([lp, lp], -1), deltas, mode, torch.cat([old, old], -1), eps)
    bigger = fn(torch.cat([lp, lp]), torch.cat([deltas, deltas]), mode, torch.cat([old, old]), eps)
    if not close(longer, base.detach()):
        return f"{mode}: {got(longer)} with every position twice, {fmt(base)} before"
    return None if close(bigger, base.detach()) else f"{mode}: {got(bigger)} with the batch twice, {fmt(base)} before"


@law(
    "compute_loss",
    "trial_order",
    "reordering the trials (replies) of log_probs, old_log_probs and deltas together changes nothing",
    _loss,
)
def _(fn, ex):
    lp, deltas, mode, old, eps = _loss_args(ex)
    p = list(ex["order"])
    a, b = fn(lp, deltas, mode, old, eps), fn(lp[:, p], deltas[:, p], mode, old[:, p], eps)
    return None if close(b, a.detach()) else f"{mode}: {got(b)} after reordering, {fmt(a)} before"


@law(
    "compute_loss",
    "default_clip_range",
    "clip_range defaults to the lecture's 0.01: leaving it out is the same as clip_range=0.01",
    _loss,
)
def _(fn, ex):
    lp, deltas, _, old, _ = _loss_args(ex)
    a, b = fn(lp, deltas, "clipped", old), fn(lp, deltas, "clipped", old, 0.01)
    if bad := _number(a) or _number(b):
        return bad
    return None if close(a, b.detach()) else f"{got(a)} without clip_range, {fmt(b)} with clip_range=0.01"


@law(
    "compute_loss",
    "unknown_mode_raises",
    "a mode other than 'naive', 'unclipped' or 'clipped' raises ValueError",
    st.fixed_dictionaries({"ex": _loss, "mode": st.sampled_from(["clip", "Naive", "ppo", ""])}),
    examples=8,
)
def _(fn, ex):
    lp, deltas, _, old, eps = _loss_args(ex["ex"])
    return raises_value_error(lambda: fn(lp, deltas, ex["mode"], old, eps))


@law(
    "compute_loss",
    "gradcheck",
    "autograd's gradient w.r.t. log_probs equals float64 central differences, in every mode",
    _loss.filter(
        lambda ex: away_from(_ratio(ex, "log_probs", "old_log_probs"), [1 - ex["clip_range"], 1 + ex["clip_range"]])
    ),
    examples=10,
)
def _(fn, ex):
    _, deltas, mode, old, eps = _loss_args(ex)
    return gradcheck(lambda lp: fn(lp, deltas, mode, old, eps), [ex["log_probs"]], "log_probs")


@law("compute_loss", "inputs_unchanged", "the inputs stay unchanged and a float64 input gives a float64 result", _loss)
def _(fn, ex):
    return unchanged(fn, _loss_args(ex))


# --- compute_kl_penalty (§10.4) -----------------------------------------------------------------------

_penalty = st.lists(st.integers(1, 3), min_size=1, max_size=2).flatmap(
    lambda dims: st.fixed_dictionaries(
        {"log_probs": tensor((*dims, 3), -4, 0), "ref_log_probs": tensor((*dims, 3), -4, 0)}
    )
)


@law(
    "compute_kl_penalty",
    "nonnegative",
    "the penalty is one number >= 0, 0 when log_probs == ref_log_probs and > 0 when they differ",
    _penalty,
)
def _(fn, ex):
    lp, ref = ex["log_probs"], ex["ref_log_probs"]
    out, same = fn(lp, ref), fn(lp, lp.clone())
    if bad := _number(out) or _number(same):
        return bad
    differ = bool(((lp - ref).abs() > 1e-3).any())
    if out.item() < -TOL or abs(same.item()) > TOL or (differ and out.item() <= 0):
        return f"{got(out)} (and {fmt(same)} for ref_log_probs = log_probs)"
    return None


@law(
    "compute_kl_penalty",
    "sum_over_positions",
    "summed over a reply's positions, averaged over the rest: repeating the positions doubles it, repeating the batch changes nothing",
    _penalty,
)
def _(fn, ex):
    lp, ref = ex["log_probs"], ex["ref_log_probs"]
    base = fn(lp, ref)
    longer, bigger = (
        fn(torch.cat([lp, lp], -1), torch.cat([ref, ref], -1)),
        fn(torch.cat([lp, lp]), torch.cat([ref, ref])),
    )
    if not close(longer, 2 * base.detach()):
        return f"{got(longer)} with every position twice, {fmt(base)} before"
    return None if close(bigger, base.detach()) else f"{got(bigger)} with the batch twice, {fmt(base)} before"


@law(
    "compute_kl_penalty",
    "below_reference_costs_more",
    "falling below the reference costs more than rising above it: the penalty of log_probs = ref - d exceeds that of ref + d (d > 0)",
    st.fixed_dictionaries({"ref": floats(-4, 0), "d": floats(0.01, 2.0)}),
)
def _(fn, ex):
    ref = torch.tensor([[ex["ref"]]], dtype=torch.float64)
    below, above = fn(ref - ex["d"], ref.clone()), fn(ref + ex["d"], ref.clone())
    if bad := _number(below) or _number(above):
        return bad
    return None if below.item() > above.item() else f"{fmt(below)} below the reference, {fmt(above)} above it"


@law(
    "compute_kl_penalty",
    "gradcheck",
    "autograd's gradient w.r.t. log_probs equals float64 central differences",
    _penalty,
    examples=10,
)
def _(fn, ex):
    ref = ex["ref_log_probs"]
    return gradcheck(lambda lp: fn(lp, ref), [ex["log_probs"]], "log_probs")


@law(
    "compute_kl_penalty",
    "inputs_unchanged",
    "the inputs stay unchanged and a float64 input gives a float64 result",
    _penalty,
)
def _(fn, ex):
    return unchanged(fn, (ex["log_probs"], ex["ref_log_probs"]))


# --- reply_logps and reference_logps (§12.2) ----------------------------------------------------------

VOCAB = 6
_MODELS: dict[tuple[int, float], torch.nn.Module] = {}  # (seed, dropout): built once, copied for each call


@dataclass(frozen=True)
class TinyLM:
    """A one-layer GPT-2 over a vocabulary of 6 (id 0 is end-of-text and padding), built from a seed."""

    seed: int
    train: bool = False
    dropout: float = 0.0

    def build(self) -> torch.nn.Module:
        """A fresh copy (the function under test may change the model's mode or parameters)."""
        key = (self.seed, self.dropout)
        if key not in _MODELS:
            _MODELS[key] = self._new()
        return copy.deepcopy(_MODELS[key]).train(self.train)

    def _new(self) -> torch.nn.Module:
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(
            vocab_size=VOCAB, n_positions=16, n_embd=8, n_layer=1, n_head=2, bos_token_id=0, eos_token_id=0,
            pad_token_id=0, resid_pdrop=self.dropout, embd_pdrop=self.dropout, attn_pdrop=self.dropout,
        )  # fmt: skip
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            return GPT2LMHeadModel(config)

    def __repr__(self) -> str:
        return f"tiny GPT-2 (seed {self.seed}, {'train' if self.train else 'eval'} mode)"


@st.composite
def _replies(draw: st.DrawFn, least_reply: int = 1) -> dict:
    """A batch of flush-left rows: prompt, reply, then padding (attention 0, any id)."""
    rows = draw(st.integers(1, 2))
    prompts = draw(st.lists(st.integers(1, 3), min_size=rows, max_size=rows))
    replies = draw(st.lists(st.integers(least_reply, 3), min_size=rows, max_size=rows))
    seq = max(p + r for p, r in zip(prompts, replies)) + draw(st.integers(0, 1))
    ids = draw(st.lists(st.integers(0, VOCAB - 1), min_size=rows * seq, max_size=rows * seq))
    lengths = torch.tensor([p + r for p, r in zip(prompts, replies)])
    return {
        "model": TinyLM(draw(st.integers(0, 2))),
        "input_ids": torch.tensor(ids).view(rows, seq),
        "attention_mask": (torch.arange(seq) < lengths[:, None]).long(),
        "prompt_lengths": torch.tensor(prompts),
    }


def _logps(
    fn: Callable, model: torch.nn.Module, ids: torch.Tensor, attention: torch.Tensor, prompts: torch.Tensor
) -> torch.Tensor:
    out = fn(model, ids, attention, prompts)
    if not isinstance(out, torch.Tensor) or out.shape != (ids.shape[0],):
        raise _Broken(f"{got(out)}, expected one number per row, shape ({ids.shape[0]},)")
    return out.detach().double()


def _one_token(fn: Callable, ex: dict) -> str | None:
    model = ex["model"].build()
    ids, prompts = ex["input_ids"], ex["prompt_lengths"]
    for i in range(len(ids)):
        p = int(prompts[i])
        row = ids[i : i + 1, : p + 1]
        out = _logps(fn, model, row, torch.ones_like(row), prompts[i : i + 1])
        with torch.no_grad():
            logits = model(row[:, :p], attention_mask=torch.ones_like(row[:, :p])).logits
            expected = torch.log_softmax(logits[0, -1].double(), -1)[row[0, p]]
        if abs(out.item() - expected.item()) > 1e-4:
            return f"row {i} cut after its first reply token: {fmt(out)}, but the model gives that token log-prob {expected.item():.4g}"
    return None


@law(
    "reply_logps",
    "one_token_reply",
    "the log-prob of a one-token reply is the model's log-probability of that token after the prompt",
    _replies(),
    examples=8,
)
def _(fn, ex):
    return _one_token(fn, ex)


@law(
    "reply_logps",
    "chain_rule",
    "log pi(reply | prompt) = log pi(first reply token | prompt) + log pi(rest of the reply | prompt and that token)",
    _replies(least_reply=2),
    examples=8,
)
def _(fn, ex):
    model = ex["model"].build()
    ids, attention, prompts = ex["input_ids"], ex["attention_mask"], ex["prompt_lengths"]
    whole = _logps(fn, model, ids, attention, prompts)
    rest = _logps(fn, model, ids, attention, prompts + 1)
    for i in range(len(ids)):
        p = int(prompts[i])
        row = ids[i : i + 1, : p + 1]
        first = _logps(fn, model, row, torch.ones_like(row), prompts[i : i + 1])
        if abs(whole[i].item() - first.item() - rest[i].item()) > 1e-4:
            return f"row {i}: {whole[i].item():.4g} for the reply, but {first.item():.4g} + {rest[i].item():.4g} for its first token and the rest"
    return None


@law(
    "reply_logps",
    "padding_changes_nothing",
    "the ids under padding (attention_mask 0, the end-of-text id included) and extra padding columns change nothing",
    st.fixed_dictionaries({"ex": _replies(), "fill": st.integers(0, VOCAB - 1)}),
    examples=8,
)
def _(fn, ex):
    e = ex["ex"]
    model = e["model"].build()
    ids, attention, prompts = e["input_ids"], e["attention_mask"], e["prompt_lengths"]
    base = _logps(fn, model, ids, attention, prompts)
    other = torch.where(attention > 0, ids, ex["fill"])
    padded = _logps(fn, model, _pad(other, 2, ex["fill"]).long(), _pad(attention, 2).long(), prompts)
    return None if close(padded, base, 1e-5) else f"{fmt(padded)} with other padding, {fmt(base)} before"


@law(
    "reply_logps",
    "mode_and_inputs_unchanged",
    "the model stays in the mode it comes in (train or eval) and the inputs stay unchanged",
    st.fixed_dictionaries({"ex": _replies(), "train": st.booleans()}),
    examples=8,
)
def _(fn, ex):
    e = ex["ex"]
    model = TinyLM(e["model"].seed, ex["train"], 0.1).build()
    args = (e["input_ids"], e["attention_mask"], e["prompt_lengths"])
    before = [a.clone() for a in args]
    fn(model, *args)
    if model.training != ex["train"]:
        return f"the model came in {'train' if ex['train'] else 'eval'} mode and left in the other"
    changed = [
        name
        for name, a, b in zip(("input_ids", "attention_mask", "prompt_lengths"), args, before)
        if not torch.equal(a, b)
    ]
    return f"{changed[0]} was changed in place" if changed else None


@law(
    "reply_logps",
    "gradient",
    "the gradient w.r.t. the model's parameters matches central differences along a random direction (float32)",
    _replies(),
    examples=6,
)
def _(fn, ex):
    model = ex["model"].build()
    args = (ex["input_ids"], ex["attention_mask"], ex["prompt_lengths"])
    params = list(model.parameters())
    out = fn(model, *args)
    if not isinstance(out, torch.Tensor) or not out.requires_grad:
        return "the result carries no gradient to the model's parameters"
    grads = torch.autograd.grad(out.sum(), params, allow_unused=True)
    gen = torch.Generator().manual_seed(ex["model"].seed)
    direction = [torch.randn(p.shape, generator=gen) for p in params]
    norm = math.sqrt(sum((d**2).sum().item() for d in direction))
    direction = [d / norm for d in direction]  # a unit step: the function is close to linear over h
    slope = sum((g * d).sum() for g, d in zip(grads, direction) if g is not None).item()
    h = 1e-2
    with torch.no_grad():
        values = []
        for sign in (1, -1):
            for p, d in zip(params, direction):
                p.add_(sign * h * d)
            values.append(fn(model, *args).sum().item())
            for p, d in zip(params, direction):
                p.sub_(sign * h * d)
    numerical = (values[0] - values[1]) / (2 * h)
    if abs(slope - numerical) > 2e-2 * max(1.0, abs(numerical)):
        return f"autograd's directional derivative {slope:.4g}, central differences {numerical:.4g}"
    return None


@law(
    "reference_logps",
    "no_gradient",
    "nothing requires grad: the result carries no gradient to the reference model",
    _replies(),
    examples=8,
)
def _(fn, ex):
    model = ex["model"].build()
    out = fn(model, ex["input_ids"], ex["attention_mask"], ex["prompt_lengths"])
    if not isinstance(out, torch.Tensor):
        return got(out)
    return "the result requires grad (a graph back to the reference model was built)" if out.requires_grad else None


@law(
    "reference_logps",
    "deterministic",
    "a reference that arrives in train mode, with dropout, gives the same numbers on every call, those of eval mode",
    _replies(),
    examples=8,
)
def _(fn, ex):
    args = (ex["input_ids"], ex["attention_mask"], ex["prompt_lengths"])
    seed = ex["model"].seed
    calm = _logps(fn, TinyLM(seed, False, 0.3).build(), *args)
    first = _logps(fn, TinyLM(seed, True, 0.3).build(), *args)
    again = _logps(fn, TinyLM(seed, True, 0.3).build(), *args)
    if close(first, calm, 1e-5) and close(again, calm, 1e-5):
        return None
    return f"{fmt(first)} then {fmt(again)} from train mode, {fmt(calm)} from eval mode"


@law(
    "reference_logps",
    "one_token_reply",
    "the log-prob of a one-token reply is the reference's log-probability of that token after the prompt",
    _replies(),
    examples=8,
)
def _(fn, ex):
    return _one_token(fn, ex)


@law(
    "reference_logps",
    "inputs_unchanged",
    "input_ids, attention_mask and prompt_lengths stay unchanged",
    _replies(),
    examples=6,
)
def _(fn, ex):
    args = (ex["input_ids"], ex["attention_mask"], ex["prompt_lengths"])
    before = [a.clone() for a in args]
    fn(ex["model"].build(), *args)
    changed = [
        name
        for name, a, b in zip(("input_ids", "attention_mask", "prompt_lengths"), args, before)
        if not torch.equal(a, b)
    ]
    return f"{changed[0]} was changed in place" if changed else None


# --- dpo_loss (§12.3) ---------------------------------------------------------------------------------

_dpo = st.integers(1, 4).flatmap(
    lambda n: st.fixed_dictionaries(
        {
            "policy_chosen_logps": tensor((n,), -20, 0),
            "policy_rejected_logps": tensor((n,), -20, 0),
            "ref_chosen_logps": tensor((n,), -20, 0),
            "ref_rejected_logps": tensor((n,), -20, 0),
            "beta": floats(0.05, 0.5),
            "shift": floats(-5, 5),
            "step": floats(0.1, 3.0),
        }
    )
)
_DPO = ("policy_chosen_logps", "policy_rejected_logps", "ref_chosen_logps", "ref_rejected_logps")


def _dpo_call(fn: Callable, ex: dict, **change: torch.Tensor) -> tuple[torch.Tensor, ...]:
    ex = _Override(ex, change)
    out = fn(*(ex[name] for name in _DPO), ex["beta"])
    n = ex["policy_chosen_logps"].shape
    if (
        not isinstance(out, tuple | list)
        or len(out) != 3
        or any(not isinstance(x, torch.Tensor) or x.shape != n for x in out)
    ):
        raise _Broken(f"{got(out)}, expected (losses, chosen_rewards, rejected_rewards), each of shape {tuple(n)}")
    return tuple(x.detach() for x in out)


@law(
    "dpo_loss",
    "policy_equals_reference",
    "when the policy equals the reference every loss is log 2 and every reward 0",
    _dpo,
)
def _(fn, ex):
    losses, chosen, rejected = _dpo_call(
        fn,
        ex,
        ref_chosen_logps=ex["policy_chosen_logps"].clone(),
        ref_rejected_logps=ex["policy_rejected_logps"].clone(),
    )
    zeros = torch.zeros_like(losses)
    if close(losses, zeros + math.log(2)) and close(chosen, zeros) and close(rejected, zeros):
        return None
    return f"losses {fmt(losses)}, rewards {fmt(chosen)} and {fmt(rejected)}"


@law(
    "dpo_loss",
    "loss_of_the_rewards",
    "the rewards are beta-scaled log-ratios and each loss is -log sigmoid(chosen_reward - rejected_reward) of the returned rewards",
    _dpo,
)
def _(fn, ex):
    losses, chosen, rejected = _dpo_call(fn, ex)
    expected = -torch.nn.functional.logsigmoid(chosen - rejected)
    return None if close(losses, expected) else f"losses {fmt(losses)}, rewards {fmt(chosen)} and {fmt(rejected)}"


@law(
    "dpo_loss",
    "log_ratios_only",
    "adding the same constant to a reply's policy and reference log-probs changes nothing (only log-ratios count)",
    _dpo,
)
def _(fn, ex):
    base = _dpo_call(fn, ex)
    c = ex["shift"]
    for side in ("chosen", "rejected"):
        pol, ref = f"policy_{side}_logps", f"ref_{side}_logps"
        out = _dpo_call(fn, ex, **{pol: ex[pol] + c, ref: ex[ref] + c})
        if not all(close(a, b) for a, b in zip(out, base)):
            return f"shifting the {side} reply by {c:.4g}: {[fmt(x) for x in out]} instead of {[fmt(x) for x in base]}"
    return None


@law(
    "dpo_loss",
    "prefers_the_chosen",
    "raising the policy's log-prob of the chosen reply lowers every loss and raises the chosen reward; raising the rejected one raises the loss",
    _dpo,
)
def _(fn, ex):
    losses, chosen, _ = _dpo_call(fn, ex)
    up, up_chosen, _ = _dpo_call(fn, ex, policy_chosen_logps=ex["policy_chosen_logps"] + ex["step"])
    worse, _, _ = _dpo_call(fn, ex, policy_rejected_logps=ex["policy_rejected_logps"] + ex["step"])
    if (up < losses).all() and (up_chosen > chosen).all() and (worse > losses).all():
        return None
    return f"losses {fmt(losses)}; {fmt(up)} with the chosen log-prob raised, {fmt(worse)} with the rejected one raised"


@law(
    "dpo_loss",
    "gradcheck",
    "autograd's gradient of the losses w.r.t. the policy's log-probs equals float64 central differences",
    _dpo,
    examples=10,
)
def _(fn, ex):
    ref_c, ref_r, beta = ex["ref_chosen_logps"], ex["ref_rejected_logps"], ex["beta"]

    def losses(c: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        out = fn(c, r, ref_c, ref_r, beta)
        return out[0] if isinstance(out, tuple | list) else out

    return gradcheck(losses, [ex["policy_chosen_logps"], ex["policy_rejected_logps"]], "the policy's log-probs")


@law("dpo_loss", "inputs_unchanged", "the inputs stay unchanged and a float64 input gives a float64 result", _dpo)
def _(fn, ex):
    return unchanged(fn, (*(ex[name] for name in _DPO), ex["beta"]))
