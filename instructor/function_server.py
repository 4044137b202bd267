"""The function server: the submission's graded functions, answered one call at a time for a gate's training child.

    python -I TREE/function_server.py TREE JOB UNUSED

A gate trains in a process that imports no student code (:mod:`instructor.gate_child`, in a tree with no student
file): its ``rlhf_practice.rl.<file>`` modules are proxies (:func:`install`) whose every graded function sends its
call here and returns what comes back. This process, started beside it by :func:`instructor.children.run_child`
(as the cases' child: the submission's tree, its limits, its user, its sandbox), imports the submission's files and
answers: tensors in, tensors out, over two pipes (JOB names their descriptors). A monkey-patch in a student file
then changes nothing but that file's own answers: the training loop, the model, its saving and the judge run
where no student code is.

The calls carry what a graded function takes: tensors, numbers, strings, lists and tuples of them, and the
models of :data:`rlhf_practice.checks.MODEL_CLASSES` (sent as class, config, weights and mode; rebuilt here once
per config). Where the training child needs a gradient, the call runs through :class:`_Remote`, an autograd
function: this process keeps the call's graph and, when the training child's backward reaches it, returns the
gradient of each input (a model's: of each parameter). The global RNG travels with every call, there and back,
so that dropout in a model draws what it would draw in one process: a gate trains to the same numbers as it
would with the student's file imported (instructor.gate's bars hold as measured).

Both sides are here (:func:`install` and :func:`serve`): the training child imports this file from its own tree
as a plain module; it imports nothing of ``instructor`` and ``rlhf_practice`` only from TREE.
"""

import os
import struct
import sys

KEPT_GRAPHS = 64  # calls whose graph this process keeps for a backward (the oldest dropped first)


def _send(stream, message: object) -> None:
    """Write ``message`` (tensors, numbers, strings, None, and lists, tuples and dicts of them): its structure as
    JSON, each tensor as dtype, shape and raw bytes. Nothing in it is code: neither side unpickles what the other
    sends (the training child reads what the submission's process wrote)."""
    import json

    import torch

    tensors: list = []

    def plain(value: object) -> object:
        if isinstance(value, torch.Tensor):
            tensors.append(value.detach().cpu().contiguous())
            return {"__tensor__": len(tensors) - 1}
        if type(value) is tuple:
            return {"__tuple__": [plain(v) for v in value]}
        if type(value) is list:
            return [plain(v) for v in value]
        if type(value) is dict:
            return {"__dict__": [[plain(k), plain(v)] for k, v in value.items()]}
        if value is None or type(value) in (bool, int, float, str):
            return value
        raise TypeError(f"cannot send a {type(value).__name__}")

    head = json.dumps(plain(message)).encode()
    meta = json.dumps([[str(t.dtype).removeprefix("torch."), list(t.shape)] for t in tensors]).encode()
    raw = [t.reshape(-1).view(torch.uint8).numpy().tobytes() for t in tensors if t.numel()]
    stream.write(b"".join([struct.pack("<QQ", len(head), len(meta)), head, meta, *raw]))
    stream.flush()


def _receive(stream) -> object:
    """The next message (:func:`_send`); None at the end of the stream or where it is not one."""
    import json

    import torch

    def read(size: int) -> bytes:
        data = stream.read(size)
        if len(data) < size:
            raise EOFError
        return data

    try:
        head_size, meta_size = struct.unpack("<QQ", read(16))
        head, meta = json.loads(read(head_size)), json.loads(read(meta_size))
        tensors = []
        for name, shape in meta:
            dtype = getattr(torch, name, None)
            if not isinstance(dtype, torch.dtype) or not all(type(n) is int and n >= 0 for n in shape):
                return None
            empty = torch.empty(shape, dtype=dtype)
            size = empty.numel() * empty.element_size()
            raw = torch.frombuffer(bytearray(read(size)), dtype=torch.uint8) if size else None
            tensors.append(raw.view(dtype).reshape(shape) if size else empty)
    except (EOFError, ValueError, TypeError, RuntimeError, struct.error):
        return None

    def value(plain: object) -> object:
        if type(plain) is list:
            return [value(v) for v in plain]
        if type(plain) is dict:
            if "__tensor__" in plain:
                return tensors[plain["__tensor__"]]
            if "__tuple__" in plain:
                return tuple(value(v) for v in plain["__tuple__"])
            return {value(k): value(v) for k, v in plain["__dict__"]}
        return plain

    try:
        return value(head)
    except (KeyError, IndexError, TypeError):
        return None


# --- the training child's side: proxies that send each call to the server


class ServerGone(RuntimeError):
    """The function server stopped answering (it crashed, hit a limit or was ended)."""


class _Client:
    def __init__(self, read_fd: int, write_fd: int):
        self.reader, self.writer = os.fdopen(read_fd, "rb"), os.fdopen(write_fd, "wb")
        self.rng = None  # the server's RNG state as of its last answer: sent again only where this one differs

    def ask(self, message: dict) -> dict:
        import torch

        state = torch.get_rng_state()
        if self.rng is None or not torch.equal(state, self.rng):
            message["rng"] = state
        try:
            _send(self.writer, message)
            reply = _receive(self.reader)
        except OSError:
            reply = None
        if not isinstance(reply, dict):
            raise ServerGone("the function server stopped answering")
        if isinstance(reply.get("rng"), torch.Tensor):  # the call drew random numbers: this process goes on from there
            torch.set_rng_state(reply["rng"])
            state = reply["rng"]
        self.rng = state
        if reply.get("error"):
            raise _error(*reply["error"])
        return reply

    def call(self, module: str, function: str, args: tuple, kwargs: dict) -> object:
        import torch

        leaves: list = []
        encoded = _encode((list(args), kwargs), leaves)
        message = {"op": "call", "module": module, "function": function, "call": encoded}
        if not (torch.is_grad_enabled() and any(t.requires_grad for t in leaves)):
            reply = self.ask({**message, "leaves": [t.detach() for t in leaves], "grad": [False] * len(leaves)})
            return _decode(reply["output"], reply["tensors"])
        holder = {"client": self, "message": message}
        tensors = _Remote.apply(holder, *leaves)
        return _decode(holder["output"], list(tensors) if holder["count"] else [])


def _error(kind: str, text: str) -> BaseException:
    """The server's error as the training child raises it: the same built-in type (NotImplementedError for a stub,
    ModuleNotFoundError for a missing file, ...), else a RuntimeError that names the type."""
    import builtins

    cls = getattr(builtins, kind, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(text)
        except Exception:  # noqa: BLE001 - a built-in type that takes other arguments
            pass
    return RuntimeError(f"{kind}: {text}")


def _encode(value: object, leaves: list, arguments: bool = True) -> object:
    """``value`` as plain data, each tensor replaced by its index in ``leaves``: a call's ``arguments`` (a model among
    them: its parameters become leaves too, :func:`_encode_model`), or else a graded function's output."""
    import torch

    if isinstance(value, torch.Tensor):  # a model's parameters too
        leaves.append(value)
        return {"__leaf__": len(leaves) - 1}
    if arguments and isinstance(value, torch.nn.Module):
        return _encode_model(value, leaves)
    if type(value) in (list, tuple):
        return type(value)(_encode(v, leaves, arguments) for v in value)
    if type(value) is dict:
        return {"__dict__": [(k, _encode(v, leaves, arguments)) for k, v in value.items()]}
    if value is None or type(value) in (bool, int, float, str):
        return value
    if arguments:
        raise TypeError(f"a graded function called through the function server cannot take a {type(value).__name__}")
    raise TypeError(f"returned a {type(value).__name__}, which the training loop cannot use")


def _encode_model(model, leaves: list) -> dict:
    """A model as the server rebuilds it: class, config (the fields a case records), its parameters as leaves, the
    rest of its state dict (buffers), its mode."""
    from torch.nn import Parameter

    from rlhf_practice.checks import HEAD_CONFIG, MODEL_CLASSES, MODEL_CONFIG

    cls = type(model).__name__
    if cls not in MODEL_CLASSES:
        raise TypeError(f"a graded function called through the function server takes a model of {MODEL_CLASSES}")
    params = [(name, _encode(p, leaves)["__leaf__"]) for name, p in model.named_parameters()]
    state = {name: t.detach() for name, t in model.state_dict(keep_vars=True).items() if not isinstance(t, Parameter)}
    fields = MODEL_CONFIG + HEAD_CONFIG.get(cls, ())
    config = {name: getattr(model.config, name) for name in fields}
    return {"__model__": cls, "config": config, "params": params, "state": state, "training": model.training}


def _decode(value: object, tensors: list, models: list | None = None) -> object:
    """What :func:`_encode` made, each leaf index replaced by its tensor; a model's data is left as it is and, where
    ``models`` is given, collected there (the server builds each one)."""
    if type(value) is dict and "__leaf__" in value:
        return tensors[value["__leaf__"]]
    if type(value) is dict and "__model__" in value and models is not None:
        models.append(value)
        return value
    if type(value) is dict and "__dict__" in value:
        return {k: _decode(v, tensors, models) for k, v in value["__dict__"]}
    if type(value) in (list, tuple):
        return type(value)(_decode(v, tensors, models) for v in value)
    return value


def _remote_function():
    import torch

    class Remote(torch.autograd.Function):
        """One call answered by the server, inside the training child's graph: forward sends the inputs (the
        leaves: tensors and model parameters), backward sends the gradient of each output and gets each input's."""

        @staticmethod
        def forward(ctx, holder: dict, *leaves):
            client = holder["client"]
            grad = list(ctx.needs_input_grad[1:])
            reply = client.ask({**holder["message"], "leaves": [t.detach() for t in leaves], "grad": grad})
            holder["output"], holder["count"] = reply["output"], len(reply["tensors"])
            ctx.client, ctx.id, ctx.grad = client, reply["id"], grad
            outputs = reply["tensors"] or [torch.zeros(0)]
            ctx.mark_non_differentiable(*(t for t, d in zip(outputs, reply["differentiable"]) if not d))
            if not reply["tensors"]:
                ctx.mark_non_differentiable(outputs[0])
            return tuple(outputs)

        @staticmethod
        def backward(ctx, *grads):
            reply = ctx.client.ask({"op": "backward", "id": ctx.id, "grads": list(grads)})
            return (None, *reply["grads"])

    return Remote


_Remote = None


def install(read_fd: int, write_fd: int) -> None:
    """Make every ``rlhf_practice.rl.<file>`` of the course a proxy module whose graded functions are answered by
    the server on the other end of the pipes (the tree's own rl/ holds no student file)."""
    import types

    import rlhf_practice.rl
    from rlhf_practice.course import GRADED, MODULES

    global _Remote
    _Remote = _remote_function()
    client = _Client(read_fd, write_fd)
    for module in MODULES:
        proxy = types.ModuleType(f"rlhf_practice.rl.{module}", f"{module}.py of the submission, answered by its server")
        for g in GRADED:
            if g.module == module:
                setattr(proxy, g.function, _proxy(client, module, g.function))
        sys.modules[proxy.__name__] = proxy
        setattr(rlhf_practice.rl, module, proxy)


def _proxy(client: _Client, module: str, function: str):
    def call(*args, **kwargs):
        return client.call(module, function, args, kwargs)

    call.__name__ = call.__qualname__ = function
    call.__module__ = f"rlhf_practice.rl.{module}"
    return call


# --- the server's side: the submission's files imported here


class _Server:
    def __init__(self):
        self.models: dict = {}  # (class, config): the model rebuilt once, its weights loaded on every call
        self.graphs: dict = {}  # call id: (the outputs that carry a gradient, the leaves that need one)
        self.count = 0

    def model(self, data: dict, leaves: list):
        """The model the call was sent (:func:`_encode_model`), its parameters the call's leaves: built the first
        time its class and config come (rlhf_practice.checks.build_model), its weights swapped in after that."""
        import json

        from rlhf_practice.checks import build_model

        key = (data["__model__"], json.dumps(data["config"], sort_keys=True))
        if key not in self.models:
            state = {**data["state"], **{name: leaves[index].detach() for name, index in data["params"]}}
            if data["__model__"] == "GPT2LMHeadModel":
                state["lm_head.weight"] = state["transformer.wte.weight"]  # tied, as model_data records it
            self.models[key] = build_model({**data, "class": data["__model__"], "state_dict": state})
        model = self.models[key]
        params, kept = dict(model.named_parameters()), model.state_dict(keep_vars=True)
        for name, index in data["params"]:  # the parameters become the leaves the gradient is read from
            param = params[name]
            param.data, param.grad = leaves[index].detach(), None
            leaves[index] = param.requires_grad_(leaves[index].requires_grad)
        for name, value in data["state"].items():  # the buffers a state dict holds
            if name in kept:
                kept[name].data = value
        return model.train(data["training"])

    def call(self, message: dict) -> dict:
        import importlib

        import torch

        leaves = [
            t.requires_grad_(bool(g and t.is_floating_point())) for t, g in zip(message["leaves"], message["grad"])
        ]
        models: list = []
        args, kwargs = _decode(message["call"], leaves, models)
        built = {id(m): self.model(m, leaves) for m in models}
        swap = lambda v: built.get(id(v), v) if type(v) is dict else v  # noqa: E731
        args, kwargs = [swap(a) for a in args], {k: swap(v) for k, v in kwargs.items()}
        fn = getattr(importlib.import_module("rlhf_practice.rl." + message["module"]), message["function"])
        with torch.set_grad_enabled(any(message["grad"])):
            output = fn(*args, **kwargs)
        tensors: list = []
        encoded = _encode(output, tensors, arguments=False)
        differentiable = [t.requires_grad for t in tensors]
        self.count += 1
        if any(differentiable):
            needing = [leaf for leaf, g in zip(leaves, message["grad"]) if g]
            outputs = {i: t for i, t in enumerate(tensors) if t.requires_grad}  # by their place among the outputs
            self.graphs[self.count] = (outputs, needing, message["grad"])
            while len(self.graphs) > KEPT_GRAPHS:
                self.graphs.pop(next(iter(self.graphs)))
        return {
            "id": self.count,
            "output": encoded,
            "tensors": [t.detach().clone() for t in tensors],
            "differentiable": differentiable,
        }

    def backward(self, message: dict) -> dict:
        """The gradient of each input the call was sent with (None where none is wanted), given each output's."""
        import torch

        outputs, needing, wanted = self.graphs.pop(message["id"])
        pairs = [(outputs[i], g) for i, g in enumerate(message["grads"]) if i in outputs and g is not None]
        found = iter(
            torch.autograd.grad([t for t, _ in pairs], needing, [g for _, g in pairs], allow_unused=True)
            if pairs
            else [None] * len(needing)
        )
        return {"grads": [next(found) if w else None for w in wanted]}


def serve(read_fd: int, write_fd: int) -> None:
    """Answer calls until the training child closes its end."""
    import torch

    reader, writer = os.fdopen(read_fd, "rb"), os.fdopen(write_fd, "wb")
    server = _Server()
    while isinstance(message := _receive(reader), dict):
        if isinstance(message.get("rng"), torch.Tensor):
            torch.set_rng_state(message["rng"])
        state = torch.get_rng_state()
        try:
            reply = server.call(message) if message["op"] == "call" else server.backward(message)
        except BaseException as err:  # noqa: BLE001 - whatever the submission raises is its call's answer
            reply = {"error": (type(err).__name__, str(err)[:500])}
        if not torch.equal(after := torch.get_rng_state(), state):
            reply["rng"] = after
        _send(writer, reply)


def main(argv: list[str]) -> None:
    tree, job_path, _ = argv
    sys.path.insert(0, tree)  # the package copy and the submission's files: before anything is imported
    import torch

    job = torch.load(job_path, weights_only=True)
    serve(job["read"], job["write"])


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
