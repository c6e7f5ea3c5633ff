#!/usr/bin/env python3
"""Checks the shape of the code that docs/architecture.md draws, for each crate given:

- no import circles between files: the graph of `crate::`, `super::`, `self::` and child-module
  paths from one production file to another has no cycle (a folder reads top-down);
- no hand-written production file over 600 lines (generated code and tests excepted);
- `unsafe` only in the modules a crate allows (FFI and system-call modules), listed below.

    tools/check-layers.py            # every crate of the workspace; exit 1 on a finding
    tools/check-layers.py -v         # also prints each file's imports inside a cycle

Test files (`tests.rs`, `tests/`), `#[cfg(test)] mod tests { ... }` blocks and comments are
not read. The parse is textual: a path written in a string would count too.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LINES = 600

# Crate source roots, and the files (relative to the root; a folder ends in '/') where
# `unsafe` may appear: the FFI shims and the system-call modules. None: no rule for the crate.
CRATES = {
    "inject/src": [
        "generated/", "interpose.rs", "procaddr.rs", "generic.rs", "cudart.rs", "driver.rs", "devices.rs", "got.rs",
        "cupti/", "nvtx/", "sys.rs", "ring.rs", "region.rs", "hook.rs", "lib.rs",
    ],
    "inject/format/src": ["crc.rs"],  # the SSE4.2 crc32 instruction
    "inject/cupti-abi/src": ["lib.rs"],  # structures, and the entry points' `unsafe extern` type
    "collector/src": ["sys/", "metrics/host.rs", "metrics/host/", "sampler/target.rs"],
}
GENERATED = ("generated/",)


def is_test(rel):
    parts = rel.split(os.sep)
    return "tests" in parts[:-1] or parts[-1] in ("tests.rs",)


def module_of(rel):
    parts = rel[:-3].split(os.sep)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return parts


def strip(src):
    """The source without comments and inline test modules (`#[cfg(test)] mod name { ... }`)."""
    src = "\n".join(line.split("//")[0] for line in src.split("\n"))
    while True:
        m = re.search(r"#\[cfg\(test\)\]\s*mod \w+\s*\{", src)
        if not m:
            return src
        depth, end = 0, len(src)
        for i in range(m.end() - 1, len(src)):
            depth += {"{": 1, "}": -1}.get(src[i], 0)
            if depth == 0:
                end = i + 1
                break
        src = src[: m.start()] + src[end:]


def use_paths(tree):
    """The paths a `use` tree names: `a::{b, c::{d, e as f}}` -> a::b, a::c::d, a::c::e."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+\w+", "", tree))
    if "{" not in tree:
        return [tree]
    i = tree.index("{")
    prefix, inner = tree[:i], tree[i + 1 : tree.rindex("}")]
    parts, depth, start = [], 0, 0
    for j, ch in enumerate(inner):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:j])
            start = j + 1
    parts.append(inner[start:])
    return [prefix + q for part in parts if part for q in use_paths(part)]


def check(crate, allowed, verbose):
    root = os.path.join(ROOT, crate)
    files = {}
    for d, _, names in os.walk(root):
        for n in names:
            if n.endswith(".rs"):
                rel = os.path.relpath(os.path.join(d, n), root)
                if not is_test(rel):
                    files[rel] = os.path.join(d, n)
    modules = {tuple(module_of(r)): r for r in files}
    # `#[path = "..."] mod name;`: the module is that file, wherever it lies.
    for rel, path in files.items():
        for target, name in re.findall(
            r'#\[path\s*=\s*"([^"]+)"\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([a-z]+\))?\s+)?mod (\w+);',
            open(path, encoding="utf-8").read(),
        ):
            file = os.path.normpath(os.path.join(os.path.dirname(rel), target))
            if file in files:
                modules[tuple(module_of(rel) + [name])] = file

    def resolve(parts):
        for n in range(len(parts), -1, -1):
            if tuple(parts[:n]) in modules:
                return modules[tuple(parts[:n])]
        return None

    findings = []
    edges = {r: set() for r in files}
    for rel, path in sorted(files.items()):
        raw = open(path, encoding="utf-8").read()
        src = strip(raw)
        me = module_of(rel)
        generated = rel.startswith(GENERATED)
        lines = raw.count("\n")
        if not generated and lines > MAX_LINES:
            findings.append(f"{crate}/{rel}: {lines} lines (at most {MAX_LINES})")
        if allowed is not None and re.search(r"\bunsafe\b", src):
            if not any(rel == a or (a.endswith("/") and rel.startswith(a)) for a in allowed):
                findings.append(f"{crate}/{rel}: unsafe outside the FFI and system-call modules")
        children = re.findall(r"^\s*(?:pub(?:\([a-z]+\))?\s+)?mod (\w+);", src, re.M)
        for child in children:
            for m in re.finditer(r"(?<![:\w])" + child + r"((?:::\w+)*)(::[{*])?", src):
                if m.group(1) or m.group(2):
                    t = resolve(me + [child] + m.group(1).split("::")[1:])
                    if t and t != rel:
                        edges[rel].add(t)
        paths = [p for u in re.findall(r"\buse\s+([^;]+);", src) for p in use_paths(u)]
        paths += [m.group(0) for m in re.finditer(r"(?<![:\w])(?:crate|super|self)(?:::\w+)+", src)]
        for path in paths:
            segs = path.split("::")
            if segs[0] in children:
                segs = ["self"] + segs
            if segs[0] not in ("crate", "super", "self"):
                continue
            base = {"crate": [], "super": me[:-1], "self": me}[segs[0]]
            while len(segs) > 1 and segs[1] == "super":
                base, segs = base[:-1], segs[1:]
            t = resolve(base + [x for x in segs[1:] if x not in ("self", "*")])
            if t and t != rel:
                edges[rel].add(t)

    # Strongly connected components (Tarjan), iteratively.
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    cycles.append(sorted(comp))
    for comp in cycles:
        findings.append(f"{crate}: {len(comp)} files import one another: {' '.join(comp)}")
        if verbose:
            for a in comp:
                findings.append(f"    {a} -> {' '.join(sorted(e for e in edges[a] if e in comp))}")
    return len(files), findings


def main():
    verbose = "-v" in sys.argv[1:]
    bad = 0
    for crate, allowed in CRATES.items():
        n, findings = check(crate, allowed, verbose)
        for f in findings:
            print(f)
        bad += sum(1 for f in findings if not f.startswith("    "))
        print(f"{crate}: {n} files, {'ok' if not findings else 'see above'}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
