#!/usr/bin/python3
"""Markdown tables of a `tmem frontier --report` run, for docs/RESULTS.md.

usage: /usr/bin/python3 tools/frontier_tables.py RUN_DIR

Reads RUN_DIR/results.json (written by `tmem frontier <task> --report`,
with any --with runs) and, where present, RUN_DIR/vs-P.json and
RUN_DIR/vs-G.json (`--vs P|G --report`), and prints:
- the frontier table: a row per (method, size) at the method's chosen
  learning rate: state floats, accuracy mean +- sd over seeds and each
  seed's, (map-recall) accuracy on observed cells, steps to the stop and
  mean seconds; then the rows of each --with run under its label;
- the learning-rate search: each method's accuracy at every rate tried on
  the first seed (the size where more than one rate ran), the chosen rate
  in bold;
- the cells still to run;
- each --vs table: accuracy against P or G, "-" for a cell not finished.
Exits 1 naming the run when results.json is missing or unreadable, or it or
a vs-*.json is not what `--report` writes.
"""
import json
import os
import sys


def pct(x):
    return f"{100 * x:.1f}"


def lr_text(lr):
    return f"{lr:.0e}".replace("e-0", "e-")


def table_rows(table, cells, observed):
    out = []
    for r in table:
        seeds = sorted((c["seed"], c["eval_accuracy"]) for c in cells
                       if (c["method"], c["size"], c["lr"]) == (r["method"], r["size"], r["lr"]))
        accs = " / ".join(pct(a) for _, a in seeds)
        row = [r["method"], r["size"], f"{r['state_floats']:,}", lr_text(r["lr"]),
             f"{pct(r['accuracy_mean'])} +- {pct(r['accuracy_sd'])}", accs]
        if observed:
            row.append(pct(r.get("observed_accuracy_mean", 0.0)))
        stops = r["stopped_at"]
        row.append(f"{sum(stops) / len(stops):.0f} ({len(stops)}/{len(r['accuracies'])})" if stops else "never")
        row.append(f"{r['seconds_mean']:.0f}")
        out.append("| " + " | ".join(row) + " |")
    return out


def frontier_table(res):
    observed = any("observed_accuracy_mean" in r for r in res["table"])
    head = ["method", "size", "state floats", "lr", "accuracy % (mean +- sd)", "each seed"]
    if observed:
        head.append("observed cells %")
    head += ["steps to stop", "seconds"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    lines += table_rows(res["table"], res["cells"], observed)
    for w in res.get("with", []):
        lines.append("| " + " | ".join([f"*{w['label']}:*"] + [""] * (len(head) - 1)) + " |")
        lines += table_rows(w["table"], w["cells"], observed)
    return lines


def lr_search(res):
    cells = res["cells"]
    if not cells:
        return []
    first_seed = min(c["seed"] for c in cells)
    lrs = sorted({c["lr"] for c in cells})
    lines = ["| method (size) | " + " | ".join(lr_text(lr) for lr in lrs) + " |", "|" + " --- |" * (len(lrs) + 1)]
    methods = [r["method"] for r in res["table"]]
    for method in dict.fromkeys(methods):
        tried = {}
        for c in cells:
            if c["method"] == method and c["seed"] == first_seed:
                tried.setdefault(c["size"], {})[c["lr"]] = c["eval_accuracy"]
        size = max(tried, key=lambda s: len(tried[s]), default=None)
        if size is None or len(tried[size]) < 2:
            continue
        chosen = res["lr_choice"].get(method)
        row = []
        for lr in lrs:
            a = tried[size].get(lr)
            row.append("-" if a is None else f"**{pct(a)}**" if lr == chosen else pct(a))
        lines.append(f"| {method} ({size}) | " + " | ".join(row) + " |")
    return lines


def vs_table(vs):
    key = vs["vs"]
    values = vs["rows"][0][key] if vs["rows"] else []
    lines = ["| method (size) | " + " | ".join(f"{key} {v}" for v in values) + " |",
             "|" + " --- |" * (len(values) + 1)]
    for r in vs["rows"]:
        accs = ["-" if a is None else pct(a) for a in r["accuracy"]]
        lines.append(f"| {r['method']} ({r['size']}) | " + " | ".join(accs) + " |")
    return lines


def read(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"frontier_tables: cannot read {path}: {e}")


def names(items):
    """A report's list of cell names, as one line."""
    if not isinstance(items, list) or not all(isinstance(n, str) for n in items):
        raise TypeError(f"to_run is not a list of cell names: {items!r}")
    return ", ".join(items) if items else "none"


def tables(run):
    """The Markdown of run's report; KeyError, TypeError, ValueError or
    AttributeError when a file is not what `--report` writes."""
    res = read(os.path.join(run, "results.json"))
    if not isinstance(res, dict) or not isinstance(res.get("task"), str):
        raise TypeError("no task")
    out = [f"{res['task']} frontier", ""] + frontier_table(res) + ["", "learning-rate search (first seed)", ""]
    out += lr_search(res)
    out += ["", "to run: " + names(res["to_run"])]
    for vs in ("P", "G"):
        path = os.path.join(run, f"vs-{vs}.json")
        if os.path.exists(path):
            v = read(path)
            out += ["", f"against {vs} (middle size, first seed)", ""] + vs_table(v)
            # A sweep that trained (not --report) writes no to_run: every cell ran.
            out += ["", "to run: " + names(v.get("to_run", []))]
    return out


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__.split("\n\n")[1])
    try:
        out = tables(argv[1])
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, ZeroDivisionError) as e:
        sys.exit(f"frontier_tables: {argv[1]}: results.json or vs-*.json is not a `tmem frontier --report` result "
                 f"({type(e).__name__}: {e})")
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv)
