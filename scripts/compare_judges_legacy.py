"""``analysis.json`` and ``reweight.json`` of the judgment store against the long-table
implementation they replaced, at the size issue 27 names (2,000 items x 4 judges x 87 attributes).

The reference is the copy of that implementation kept for the equivalence test
(``tests/rmeval/judges/legacy``, commit ea5a952), run on the same simulated panel as a long table;
the package runs on the store, with its worker processes. Both with the commands' default settings
(20 split halves, 20 null repetitions; budgets 32-256, 10 repeats, top-k 6 and 12) and the items'
reference labels. Prints how many numbers each document holds, the largest absolute difference
between the two, and any difference of structure (keys, key order, lengths, types) or of a
non-number; exit 1 if anything differs. Run from the repository root:

    PYTHONPATH=. python scripts/compare_judges_legacy.py --items 2000 --judges 4 --attributes 87
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def compare(a: Any, b: Any, path: str = "") -> tuple[int, float, list[str]]:
    """(numbers compared, largest absolute difference, places where the structure or a
    non-number differs) of two JSON documents; NaN equals NaN."""
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            return 0, 0.0, [f"{path}: keys {list(a)} != {list(b)}"]
        parts = [compare(a[k], b[k], f"{path}.{k}") for k in a]
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return 0, 0.0, [f"{path}: length {len(a)} != {len(b)}"]
        parts = [compare(x, y, f"{path}[{n}]") for n, (x, y) in enumerate(zip(a, b))]
    elif isinstance(a, (int, float)) and not isinstance(a, bool) and type(a) is type(b):
        if isinstance(a, float) and math.isnan(a) and math.isnan(b):
            return 1, 0.0, []
        diff = abs(a - b)
        return 1, (math.inf if math.isnan(diff) else float(diff)), []
    else:
        return 0, 0.0, ([] if type(a) is type(b) and a == b else [f"{path}: {a!r} != {b!r}"])
    return (sum(p[0] for p in parts), max((p[1] for p in parts), default=0.0), [d for p in parts for d in p[2]])


def plain(doc: dict[str, Any]) -> Any:
    """The document as the pipeline writes it (numpy scalars as JSON numbers): written with
    rmcore.io.atomic_write_json and read back."""
    from rmcore.io import atomic_write_json  # pandas: --help stays cheap

    with tempfile.TemporaryDirectory() as d:
        return json.loads(atomic_write_json(Path(d) / "doc.json", doc).read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--judges", type=int, default=4)
    ap.add_argument("--attributes", type=int, default=87)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from rmeval.judges.analysis import analyze
    from rmeval.judges.reweight import reweight
    from rmeval.judges.simulate import simulate_benchmark
    from rmeval.judges.store import store_to_table
    from tests.rmeval.judges.legacy.analysis import analyze as legacy_analyze
    from tests.rmeval.judges.legacy.reweight import reweight as legacy_reweight

    items, store = simulate_benchmark(args.items, args.judges, args.attributes, seed=args.seed)
    table = store_to_table(store)
    print(f"{args.items} items x {args.judges} judges x {args.attributes} attributes: {len(table):,} judgments",
          flush=True)
    failed = False
    for name, new, old in (("analysis.json", lambda: analyze(store, items), lambda: legacy_analyze(table, items)),
                           ("reweight.json", lambda: reweight(items, store), lambda: legacy_reweight(items, table))):
        t0 = time.perf_counter()
        a = plain(new())
        t1 = time.perf_counter()
        b = plain(old())
        t2 = time.perf_counter()
        n, largest, other = compare(b, a)
        failed |= bool(other) or largest > 0
        print(f"{name}: {n:,} numbers, largest absolute difference {largest:g}, {len(other)} other differences "
              f"(store {t1 - t0:.1f} s, long table {t2 - t1:.1f} s)", flush=True)
        for d in other[:10]:
            print(f"  {d}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
