#!/usr/bin/env python3
"""Checks the workspace's layout rules (docs/architecture.md, "Layout"):

  - no module cycle inside a crate: the modules a crate's non-test code
    names through `crate::…` and `super::…` paths form no cycle (a parent
    and its own child modules are not counted: a parent re-exporting what
    its children define is not a cycle);
  - every Rust source file under 550 lines;
  - every function under 100 lines (counted from its `fn` line to its
    closing brace, by brace matching outside strings and comments).

usage: ci/layout-check.py [--list]   (--list prints every file and function
near a limit, for planning a split)

Prints each breach with its place and exits 1 if there is any.
"""
import os
import re
import sys

CRATES = ["fleet", "bindings", "workloads", "bench", "routing", "router", "route-lab"]
FILE_LIMIT = 550
FN_LIMIT = 100
SKIP_DIRS = {"target", ".git", "node_modules"}


def rust_files(root):
    for dp, dn, fn in os.walk(root):
        dn[:] = [d for d in dn if d not in SKIP_DIRS]
        for f in fn:
            if f.endswith(".rs"):
                yield os.path.join(dp, f)


def strip_code(text):
    """The text with comments and string/char literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
            continue
        if text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * text.count("\n", i, j))
            i = j
            continue
        m = re.match(r'r(#*)"', text[i:i + 10]) if c == "r" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")) else None
        if m:
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
            continue
        if c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:i + 12])
            if m:
                out.append("' '")
                i += len(m.group(0))
                continue
        out.append(c)
        i += 1
    return "".join(out)


def long_functions(path):
    lines = strip_code(open(path, encoding="utf-8").read()).split("\n")
    found = []
    fn_re = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+\"[^\"]*\"\s+)?fn\s+(\w+)")
    for start, line in enumerate(lines):
        m = fn_re.match(line)
        if not m:
            continue
        depth, opened = 0, False
        for end in range(start, len(lines)):
            seg = lines[end]
            if not opened and ";" in seg and "{" not in seg:
                break
            for ch in seg:
                if ch == "{":
                    depth, opened = depth + 1, True
                elif ch == "}":
                    depth -= 1
            if opened and depth <= 0:
                found.append((end - start + 1, start + 1, m.group(7)))
                break
    return found


def module_of(root, path):
    parts = os.path.relpath(path, root)[:-3].split(os.sep)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def module_cycles(crate):
    root = os.path.join(crate, "src")
    mods, edges = set(), {}
    for p in rust_files(root):
        if p.endswith("_tests.rs") or os.sep + "bin" + os.sep in p:
            continue
        m = module_of(root, p)
        mods.add(m)
        code = strip_code(open(p, encoding="utf-8").read()).split("#[cfg(test)]")[0]
        targets = edges.setdefault(m, set())
        for t in re.findall(r"\bcrate::([a-z_]\w*(?:::[a-z_]\w*)*)", code):
            targets.add(tuple(t.split("::")))
        for t in re.findall(r"\bsuper::([a-z_]\w*(?:::[a-z_]\w*)*)", code):
            targets.add(m[:-1] + tuple(t.split("::")))

    def resolve(t):
        for k in range(len(t), 0, -1):
            if t[:k] in mods:
                return t[:k]
        return None

    graph = {}
    for a, ts in edges.items():
        for t in ts:
            b = resolve(t)
            if b is None or b == a or a[: len(b)] == b or b[: len(a)] == a:
                continue
            graph.setdefault(a, set()).add(b)
    # Tarjan's strongly connected components.
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def main():
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    listing = "--list" in sys.argv[1:]
    breaches = []
    for crate in CRATES:
        for comp in module_cycles(crate):
            breaches.append(f"{crate}: module cycle {{{', '.join('::'.join(m) for m in comp)}}}")
    for crate in CRATES:
        for p in sorted(rust_files(crate)):
            n = open(p, encoding="utf-8").read().count("\n")
            if n >= FILE_LIMIT or (listing and n >= FILE_LIMIT - 50):
                (breaches if n >= FILE_LIMIT else []).append(f"{p}: {n} lines (limit {FILE_LIMIT})")
                if listing:
                    print(f"file  {n:4} {p}")
            for length, line, name in long_functions(p):
                if length >= FN_LIMIT:
                    breaches.append(f"{p}:{line}: fn {name} is {length} lines (limit {FN_LIMIT})")
                if listing and length >= FN_LIMIT - 20:
                    print(f"fn    {length:4} {p}:{line} {name}")
    for b in breaches:
        print("FAIL", b)
    print(f"layout: {len(breaches)} breach(es) in {', '.join(CRATES)}")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
