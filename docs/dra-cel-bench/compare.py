"""Measure one of the three PyPI CEL libraries on DRA device selectors (docs/dra-cel.md).

Run it in a virtualenv holding only that library (see docs/dra-cel.md for the commands):

    python compare.py cel-expr-python            # Google's cel-cpp, wrapped
    python compare.py common-expression-language # the Rust cel-interpreter, wrapped
    python compare.py cel-python                 # pure Python (celpy)
    python compare.py cel-python-compiled        # celpy's transpiling runner

It prints, per selector, the result, microseconds per compile and per evaluation (best of 5 rounds), then how
long a nested comprehension of 10^depth iterations takes and whether another Python thread runs meanwhile
(ticks of a 1 ms sleeper, against about one per millisecond if the GIL were free). With ``--memory``, how
much the process's resident memory grows per evaluation of the ``capacity`` selector (two calls into Python
functions) and of ``driver+model`` (none), over 100,000 evaluations (10,000 for cel-python).

Each library gets what it can take of Kubernetes' types: cel-expr-python a Quantity and a Semver as protobuf
messages, celpy as Python objects, common-expression-language as tagged maps (it takes no custom types). The
parsing behind them is the same small stand-in in all three, so the Python cost of a call is the same.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from fractions import Fraction
from typing import Any, Callable

SELECTORS = {
    "driver+model": 'device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "a100"',
    "capacity": 'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0',
    "semver": 'device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.2.0"))',
    "in": '"model" in device.attributes["gpu.example.com"]',
    "strings": 'device.attributes["gpu.example.com"].model.lowerAscii().startsWith("a1")',
    "lists": 'device.attributes["gpu.example.com"].cores in [64, 128] && [1, 2, 3].isSorted()',
    "exists": 'device.attributes["gpu.example.com"].exists(k, k.startsWith("driver"))',
}
DRIVER = "gpu.example.com"
DEVICE = {
    "name": "gpu-0",
    "attributes": {"model": {"string": "a100"}, "driverVersion": {"version": "1.4.2"}, "cores": {"int": 128},
                   "mig": {"bool": True}, "pcie.example.com/root": {"string": "pci0000:00"}},
    "capacity": {"memory": {"value": "80Gi"}},
}
_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "": 1, "k": 10**3, "M": 10**6, "G": 10**9, "m": Fraction(1, 1000)}


def parse_quantity(s: str) -> Fraction:
    i = len(s)
    while i and not s[i - 1].isdigit():
        i -= 1
    return Fraction(s[:i]) * _UNITS[s[i:]]


def parse_semver(s: str) -> tuple[int, ...]:
    return tuple(int(p) for p in s.split("-", 1)[0].split("+", 1)[0].split("."))


def cmp(a: Any, b: Any) -> int:
    return (a > b) - (a < b)


def is_sorted(items: Any) -> bool:
    return all(a <= b for a, b in zip(items, items[1:]))


def domains(wrap_version: Callable[[str], Any], wrap_quantity: Callable[[str], Any]) -> tuple[dict, dict]:
    """(attributes, capacity) as domain -> id -> value, upstream's layout."""
    attributes: dict[str, dict[str, Any]] = {}
    capacity: dict[str, dict[str, Any]] = {}
    for name, attr in DEVICE["attributes"].items():
        domain, _, ident = name.rpartition("/")
        (kind, v), = attr.items()
        attributes.setdefault(domain or DRIVER, {})[ident] = wrap_version(v) if kind == "version" else v
    for name, cap in DEVICE["capacity"].items():
        domain, _, ident = name.rpartition("/")
        capacity.setdefault(domain or DRIVER, {})[ident] = wrap_quantity(cap["value"])
    return attributes, capacity


# ------------------------------------------------------------------------------------------------ adapters
# each returns (compile(text) -> program, evaluate(program) -> bool, evaluate a program that takes no device)

def cel_expr_python() -> tuple[Callable, Callable, Callable]:
    from cel_expr_python import cel
    from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    T = cel.Type
    f = descriptor_pb2.FileDescriptorProto(name="k.proto", package="kubernetes", syntax="proto3")
    for n in ("Quantity", "Semver"):
        f.message_type.add(name=n).field.add(name="_v", number=1, type=9, label=1)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    Q = message_factory.GetMessageClass(pool.FindMessageTypeByName("kubernetes.Quantity"))
    S = message_factory.GetMessageClass(pool.FindMessageTypeByName("kubernetes.Semver"))
    QT, ST = T("kubernetes.Quantity"), T("kubernetes.Semver")

    def val(m: Any) -> Any:
        return parse_quantity(m._v) if isinstance(m, Q) else parse_semver(m._v)

    def member(name: str, result: Any, impl: Callable) -> Any:
        return cel.FunctionDecl(name, [
            cel.Overload(f"quantity_{name}", return_type=result, parameters=[QT, QT], is_member=True, impl=impl),
            cel.Overload(f"semver_{name}", return_type=result, parameters=[ST, ST], is_member=True)])
    functions = [
        cel.FunctionDecl("quantity", [cel.Overload("q", return_type=QT, parameters=[T.STRING],
                                                   impl=lambda s: Q(_v=s))]),
        cel.FunctionDecl("semver", [cel.Overload("s", return_type=ST, parameters=[T.STRING],
                                                 impl=lambda s: S(_v=s))]),
        member("compareTo", T.INT, lambda a, b: cmp(val(a), val(b))),
        member("isGreaterThan", T.BOOL, lambda a, b: val(a) > val(b)),
        cel.FunctionDecl("isSorted", [cel.Overload("l", return_type=T.BOOL, parameters=[T.List(T.DYN)],
                                                   is_member=True, impl=is_sorted)]),
    ]
    env = cel.NewEnv(pool, functions=functions,
                     variables={"device.driver": T.STRING, "device.attributes": T.Map(T.STRING, T.Map(T.STRING, T.DYN)),
                                "device.capacity": T.Map(T.STRING, T.Map(T.STRING, QT))},
                     extensions=[ext_strings.ExtStrings(), ext_bindings.ExtBindings(), ext_optional.ExtOptional()])
    attributes, capacity = domains(lambda v: S(_v=v), lambda v: Q(_v=v))
    data = {"device.driver": DRIVER, "device.attributes": attributes, "device.capacity": capacity}

    def evaluate(program: Any) -> bool:
        r = program.eval(data=data)
        if r.type().name() != "BOOL":
            raise RuntimeError(r.value())
        return r.value()
    return env.compile, evaluate, lambda program: program.eval().value()


def common_expression_language() -> tuple[Callable, Callable, Callable]:
    import cel
    from cel.stdlib import add_stdlib_to_context

    def val(m: dict) -> Any:
        return parse_quantity(m["q"]) if "q" in m else parse_semver(m["s"])
    ctx = cel.Context()
    add_stdlib_to_context(ctx)
    functions = {"quantity": lambda s: {"q": s}, "semver": lambda s: {"s": s}, "isSorted": is_sorted,
                 "compareTo": lambda a, b: cmp(val(a), val(b)), "isGreaterThan": lambda a, b: val(a) > val(b)}
    for name, fn in functions.items():
        ctx.add_function(name, fn)
    attributes, capacity = domains(lambda v: {"s": v}, lambda v: {"q": v})
    ctx.add_variable("device", {"driver": DRIVER, "attributes": attributes, "capacity": capacity})
    return cel.compile, lambda program: program.execute(ctx), lambda program: program.execute({})


def cel_python(runner: str) -> tuple[Callable, Callable, Callable]:
    import logging
    logging.disable(logging.CRITICAL)       # celpy logs every step at DEBUG
    import celpy
    from celpy import celtypes

    class Box:
        def __init__(self, v: Any) -> None:
            self.v = v
    functions = {
        "quantity": lambda s: Box(parse_quantity(str(s))), "semver": lambda s: Box(parse_semver(str(s))),
        "compareTo": lambda a, b: celtypes.IntType(cmp(a.v, b.v)),
        "isGreaterThan": lambda a, b: celtypes.BoolType(a.v > b.v),
        "isSorted": lambda items: celtypes.BoolType(is_sorted(items)),
        "lowerAscii": lambda s: celtypes.StringType(s.lower()),
    }
    # celpy's parser keeps the tree class of the first Environment, so build only the one we measure
    env = celpy.Environment(runner_class=getattr(celpy, runner))
    attributes, capacity = domains(lambda v: Box(parse_semver(v)), lambda v: Box(parse_quantity(v)))

    def to_cel(m: dict) -> Any:
        return celtypes.MapType({celtypes.StringType(d): celtypes.MapType(
            {celtypes.StringType(k): v if isinstance(v, Box) else celpy.json_to_cel(v) for k, v in ids.items()})
            for d, ids in m.items()})
    activation = {"device": celtypes.MapType({
        celtypes.StringType("driver"): celtypes.StringType(DRIVER),
        celtypes.StringType("attributes"): to_cel(attributes), celtypes.StringType("capacity"): to_cel(capacity)})}

    def compile_(text: str) -> Any:
        return env.program(env.compile(text), functions=functions)
    return compile_, lambda program: program.evaluate(activation), lambda program: program.evaluate({})


ADAPTERS = {
    "cel-expr-python": cel_expr_python,
    "common-expression-language": common_expression_language,
    "cel-python": lambda: cel_python("InterpretedRunner"),
    "cel-python-compiled": lambda: cel_python("CompiledRunner"),
}


# ------------------------------------------------------------------------------------------------ measuring

def best_us(fn: Callable[[], Any], n: int) -> float:
    rounds = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        rounds.append((time.perf_counter() - t) / n * 1e6)
    return min(rounds)


def nested(depth: int) -> str:
    body = "v0 > 0"
    for k in range(depth):
        body = f"[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(v{k}, {body})"
    return body


def timed_with_a_ticker(fn: Callable[[], Any]) -> tuple[Any, float, int]:
    """(result or error, seconds, ticks another thread made meanwhile)."""
    ticks, stop = [0], [False]

    def ticker() -> None:
        while not stop[0]:
            time.sleep(0.001)
            ticks[0] += 1
    th = threading.Thread(target=ticker, daemon=True)
    th.start()
    t = time.perf_counter()
    try:
        result: Any = fn()
    except Exception as err:  # noqa: BLE001 - the error is the measurement
        result = f"{type(err).__name__}: {str(err)[:70]}"
    seconds = time.perf_counter() - t
    stop[0] = True
    th.join()
    return result, seconds, ticks[0]


def growth_per_call(fn: Callable[[], Any], n: int) -> float:
    """Bytes of resident memory gained per call of ``fn``, over ``n`` calls (Linux: /proc/self/statm)."""
    import os

    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    for _ in range(1000):
        fn()
    gc.collect()
    before = rss()
    for _ in range(n):
        fn()
    gc.collect()
    return (rss() - before) / n


def main(library: str, fast: bool) -> None:
    compile_, evaluate, evaluate_alone = ADAPTERS[library]()
    n_compile, n_eval = (20, 200) if library.startswith("cel-python") else (200, 5000)
    print(f"{library}: selector, result, compile us, eval us")
    for key, text in SELECTORS.items():
        try:
            program = compile_(text)
            result = evaluate(program)
        except Exception as err:  # noqa: BLE001
            print(f"  {key:13} ERROR {type(err).__name__}: {str(err)[:110]}")
            continue
        gc.collect()
        print(f"  {key:13} {result!s:5} {best_us(lambda: compile_(text), n_compile):8.1f} "
              f"{best_us(lambda: evaluate(program), n_eval):9.2f}")
    if "--memory" in sys.argv:
        n = 10_000 if library.startswith("cel-python") else 100_000
        for key in ("capacity", "driver+model"):
            program = compile_(SELECTORS[key])
            print(f"  {key}: {growth_per_call(lambda: evaluate(program), n):.0f} bytes more memory per evaluation")
    for depth in range(3, 5 if fast or library.startswith("cel-python") else 8):
        program = compile_(nested(depth))
        result, seconds, ticks = timed_with_a_ticker(lambda: evaluate_alone(program))
        print(f"  nested all() 10^{depth} iterations: {result!s:40} {seconds * 1000:9.1f} ms, other thread ticked "
              f"{ticks} times")


if __name__ == "__main__":
    main(sys.argv[1], "--fast" in sys.argv)
