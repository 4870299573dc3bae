#!/usr/bin/env python3
"""The results tables of README.md and BENCHMARKS.md, from `compare` logs.

A log is what `cargo bench --bench compare > LOG` prints: progress lines,
then one markdown table (workload, implementation, median, 95% interval,
p99, p99.9, vs best peer). Give the logs of one or more full runs:

    python3 scripts/bench_table.py --readme LOG...   # README's headline table
    python3 scripts/bench_table.py --full LOG...     # BENCHMARKS.md's table
    python3 scripts/bench_table.py --update LOG...   # rewrite both in place

`--update` replaces what stands between `<!-- bench-table:readme -->` and
`<!-- /bench-table -->` in README.md, and between `<!-- bench-table:full -->`
and `<!-- /bench-table -->` in BENCHMARKS.md, with what `--readme` and
`--full` print.

How the figures are chosen. An implementation whose name starts with
"deliloop" is ours; one marked "(baseline)" or "(floor)" is shown for scale
and is nobody's peer; every other one is a peer. Lower is better in every
row (ns, latency, bytes), so a ratio is the best peer's median divided by
deliloop's: above 1, deliloop is ahead. For each line, each log gives a
ratio; the line quotes its median run: the log whose ratio is the median
of the logs' (with an even count, the lower of the two middle ones), with
that log's medians and best peer. A line of a peer, a baseline or a floor
quotes the log whose median is the median of the logs'. Standard library
only.
"""

import argparse
import os
import re
import sys

UNITS = {
    "ps": 1e-3, "ns": 1.0, "µs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9,
    "B": 1.0, "KiB": 1024.0, "MiB": 1024.0 ** 2, "GiB": 1024.0 ** 3,
}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def value(text):
    """'108.5 ns' -> 108.5; '1.15 µs' -> 1150.0; '56 B' -> 56.0."""
    m = re.fullmatch(r"(-?[0-9.]+)\s*(\S+)", text.strip())
    if not m or m.group(2) not in UNITS:
        raise ValueError(f"not a figure: {text!r}")
    return float(m.group(1)) * UNITS[m.group(2)]


def kind(implementation):
    if "(baseline)" in implementation or "(floor)" in implementation:
        return "scale"
    if implementation.startswith("deliloop"):
        return "ours"
    return "peer"


def read_log(path):
    """[(workload, [(implementation, median text, median value)])], in order."""
    groups = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("|"):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) < 7 or cells[0] == "workload" or cells[0].startswith("---"):
                continue
            workload, implementation, median = cells[0], cells[1], cells[2]
            if not groups or groups[-1][0] != workload:
                groups.append((workload, []))
            groups[-1][1].append((implementation, median, value(median)))
    if not groups:
        sys.exit(f"{path}: no results table")
    return groups


def row_id(workload, first_words):
    """A1, B'', E5...; C 0, C 1k, C 100k; F 0%, F mem 50%; B' load 2."""
    head = workload.split()[0].rstrip(":")
    m = re.search(r"\[load (\d+)\]", workload)
    if m:
        return f"{head} load {m.group(1)}"
    if first_words.count(head) == 1:
        return head
    m = re.search(r"with (\d+) pending", workload)
    if m:
        n = int(m.group(1))
        return f"{head} {n // 1000}k" if n >= 1000 and n % 1000 == 0 else f"{head} {n}"
    m = re.search(r"(\d+%)", workload)
    if m:
        return f"{head} mem {m.group(1)}" if "bytes" in workload else f"{head} {m.group(1)}"
    return head


def ratio_text(r):
    if r is None:
        return "–"
    if r >= 100:
        return f"{r:.0f}x"
    if round(r, 2) >= 0.1:
        return f"{r:.2f}x"
    return f"{r:.2g}x"


def name_text(name):
    """Names with `<` go in backticks, so that Markdown shows them as text."""
    return f"`{name}`" if "<" in name else name


def best_of(entries, exclude):
    """The peer with the lowest median, other than `exclude`."""
    peers = [e for e in entries if kind(e[0]) == "peer" and e[0] != exclude]
    return min(peers, key=lambda e: e[2]) if peers else None


def median_index(keys):
    order = sorted(range(len(keys)), key=lambda i: keys[i])
    return order[(len(order) - 1) // 2]


def collect(paths):
    """Per line (workload, implementation): the figures of every log."""
    runs = [dict((w, e) for w, e in read_log(p)) for p in paths]
    order = [w for w, _ in read_log(paths[0])]
    first_words = [w.split()[0].rstrip(":") for w in order]
    rows = []
    for workload in order:
        names = [e[0] for e in runs[0][workload]]
        for name in names:
            per_run = []
            for run in runs:
                entries = run.get(workload)
                if entries is None:
                    sys.exit(f"workload missing from a log: {workload}")
                mine = [e for e in entries if e[0] == name]
                if not mine:
                    sys.exit(f"{workload}: {name} missing from a log")
                mine = mine[0]
                best = best_of(entries, name) if kind(name) != "scale" else None
                r = best[2] / mine[2] if best and mine[2] > 0 else None
                per_run.append((mine, best, r))
            rows.append((row_id(workload, first_words), workload, name, per_run))
    return rows


def pick(per_run, name):
    if kind(name) == "ours" and all(r is not None for _, _, r in per_run):
        return per_run[median_index([r for _, _, r in per_run])]
    return per_run[median_index([m[2] for m, _, _ in per_run])]


def spread(per_run):
    rs = [r for _, _, r in per_run if r is not None]
    if len(rs) < 2:
        return ""
    return f" ({ratio_text(min(rs))}–{ratio_text(max(rs))})"


def middle(n):
    return f"the median of the {n}" if n % 2 else f"the lower middle one of the {n}"


def caption(n):
    if n == 1:
        return "*One full run.*"
    return (f"*{n} full runs; each line quotes its median run: the run whose "
            f"ratio is {middle(n)}, with the lowest and highest ratio in "
            f"brackets.*")


def caption_full(n):
    if n == 1:
        return "*One full run.*"
    return (f"*{n} full runs; each workload quotes its median run: the run in "
            f"which deliloop's first line has {middle(n)} ratios. In brackets, "
            f"the lowest and highest of each deliloop line's {n} ratios, and "
            f"that line's median where another run has it.*")


def short(name):
    """deliloop's implementation, less the word "deliloop" where a word follows."""
    rest = name[len("deliloop "):] if name.startswith("deliloop ") else ""
    return rest if rest[:1].isalpha() else name


def readme(paths):
    rows = collect(paths)
    out = [caption(len(paths)), "",
           "| row | deliloop | median | best peer | its median | best peer / deliloop |",
           "|---|---|---|---|---|---|"]
    left_out = []
    for rid, workload, name, per_run in rows:
        if kind(name) != "ours":
            continue
        if any(r is None for _, _, r in per_run):
            if rid not in left_out:
                left_out.append(rid)
            continue
        mine, best, r = pick(per_run, name)
        out.append(f"| {rid} | {short(name)} | {mine[1]} | {name_text(best[0])} | "
                   f"{best[1]} | {ratio_text(r)}{spread(per_run)} |")
    if left_out:
        out += ["", f"No peer runs {', '.join(left_out)} (deliloop against a baseline only)."]
    return "\n".join(out)


def full(paths):
    """One line per workload: deliloop's lines, the other implementations,
    and deliloop's ratio to the best peer (each of its lines, in order)."""
    rows = collect(paths)
    out = [caption_full(len(paths)), "",
           "| row | deliloop | the others | vs best peer |",
           "|---|---|---|---|"]
    groups = []
    for row in rows:
        if not groups or groups[-1][0][1] != row[1]:
            groups.append([])
        groups[-1].append(row)
    for group in groups:
        rid, workload = group[0][0], group[0][1]
        ours = [per_run for _, _, name, per_run in group
                if kind(name) == "ours" and all(r is not None for _, _, r in per_run)]
        if ours:
            k = median_index([r for _, _, r in ours[0]])
        else:
            k = median_index([m[2] for m, _, _ in group[0][3]])
        label = workload if workload.startswith(rid.split()[0]) else f"{rid} {workload}"
        mine_cells, other_cells, vs_cells = [], [], []
        n_ours = sum(1 for _, _, name, _ in group if kind(name) == "ours")
        for _, _, name, per_run in group:
            mine, _, r = per_run[k]
            if kind(name) == "ours":
                mine_cells.append(mine[1] if n_ours == 1 else f"{name_text(short(name))} {mine[1]}")
                if r is not None:
                    vs = f"**{ratio_text(r)}**"
                    if len(per_run) > 1:
                        rs = [x for _, _, x in per_run]
                        med = pick(per_run, name)[2]
                        note = f"; median {ratio_text(med)}" if ratio_text(med) != ratio_text(r) else ""
                        vs += f" ({ratio_text(min(rs))}–{ratio_text(max(rs))}{note})"
                    vs_cells.append(vs)
            else:
                other_cells.append(f"{name_text(name)} {mine[1]}")
        out.append(f"| {label} | {'; '.join(mine_cells)} | {'; '.join(other_cells)} | "
                   f"{' / '.join(vs_cells) if vs_cells else '–'} |")
    return "\n".join(out)


def replaced(path, tag, text):
    """`path`'s text with its `tag` block replaced by `text`."""
    with open(path, encoding="utf-8") as f:
        doc = f.read()
    start = f"<!-- bench-table:{tag} -->"
    end = "<!-- /bench-table -->"
    i = doc.find(start)
    j = doc.find(end, i + len(start)) if i >= 0 else -1
    if i < 0 or j < 0:
        sys.exit(f"{os.path.relpath(path, ROOT)}: no {start} ... {end} block")
    return doc[: i + len(start)] + "\n" + text + "\n" + doc[j:]


def update(logs):
    """Both blocks checked first, then both files written."""
    docs = [(os.path.join(ROOT, "README.md"), "readme", readme(logs)),
            (os.path.join(ROOT, "BENCHMARKS.md"), "full", full(logs))]
    new = [(path, replaced(path, tag, text)) for path, tag, text in docs]
    for path, doc in new:
        with open(path, "w", encoding="utf-8") as f:
            f.write(doc)
        print(f"updated {os.path.relpath(path, ROOT)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--readme", action="store_true", help="print README's table")
    mode.add_argument("--full", action="store_true", help="print BENCHMARKS.md's table")
    mode.add_argument("--update", action="store_true",
                      help="rewrite both tables in README.md and BENCHMARKS.md")
    ap.add_argument("logs", nargs="+", help="compare logs of full runs")
    args = ap.parse_args()
    if args.readme:
        print(readme(args.logs))
    elif args.full:
        print(full(args.logs))
    else:
        update(args.logs)


if __name__ == "__main__":
    main()
