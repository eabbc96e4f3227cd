"""tandem's own selector API (scheduler/dra/cel.py) on the selectors of compare.py (docs/dra-cel.md).

From the repository root: ``.venv/bin/python docs/dra-cel-bench/selector_speed.py``. Prints the one-time cost of
the environment, then per selector microseconds to compile (type check, rewrite, compile again) and per
``Selector.matches``, the cost of ``device_view`` for a device of 5 and of 32 attributes, and the memory a
``matches`` keeps (cel-expr-python's leak: none but for ``lists``, whose ``isSorted`` is Python). With ``--worst``,
the slowest selector found within the 10,000-iteration budget, twice: the time guard fails the first run after it
ends and the second without running it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from compare import DEVICE, DRIVER, SELECTORS, best_us, growth_per_call  # noqa: E402

from scheduler.dra import cel  # noqa: E402


def main() -> None:
    t = time.perf_counter()
    cel._env()
    print(f"environment built once: {(time.perf_counter() - t) * 1000:.1f} ms")
    view = cel.device_view(DRIVER, DEVICE)
    print("selector, compile us (uncached), matches us")
    for key, text in SELECTORS.items():
        selector = cel.compile_selector(text)
        assert selector.matches(view) is True, key
        print(f"  {key:13} {best_us(lambda: cel.compile_program(text), 200):8.1f} "
              f"{best_us(lambda: selector.matches(view), 5000):8.2f}")
    print(f"  cached compile_selector: {best_us(lambda: cel.compile_selector(SELECTORS['capacity']), 5000):.2f} us")
    big = {"name": "big", "attributes": {f"a{i}": {"int": i} for i in range(31)} | {"v": {"version": "1.2.3"}},
           "capacity": {f"c{i}": {"value": f"{i}Gi"} for i in range(8)}}
    print(f"device_view, 5 attributes + 1 capacity: {best_us(lambda: cel.device_view(DRIVER, DEVICE), 2000):.1f} us")
    print(f"device_view, 32 attributes + 8 capacities: {best_us(lambda: cel.device_view(DRIVER, big), 2000):.1f} us")
    big_view = cel.device_view(DRIVER, big)
    selector = cel.compile_selector('device.driver == "gpu.example.com" && '
                                    'device.attributes["gpu.example.com"].a7 == 7')
    print(f"matches on the 32-attribute device: {best_us(lambda: selector.matches(big_view), 5000):.2f} us")
    for key in ("capacity", "semver", "lists"):
        selector = cel.compile_selector(SELECTORS[key])
        print(f"{key}: {growth_per_call(lambda: selector.matches(view), 100_000):.0f} bytes more memory per matches")
    if "--worst" in sys.argv:
        worst = cel.compile_selector('"' + "a" * 9990 + '".split("").map(x, x).size() > 0')
        for _ in range(2):
            t = time.perf_counter()
            try:
                worst.matches(view)
            except cel.CELError as err:
                print(f"worst case: {(time.perf_counter() - t) * 1000:.0f} ms: {err}")


if __name__ == "__main__":
    main()
