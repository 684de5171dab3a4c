#!/usr/bin/env python3
"""Fails when a crate's modules import each other in a circle.

Usage: scripts/check-cycles.py [-v] SRC_DIR...   (e.g. crates/node/src)

The rule: at every level of a crate, the sibling modules of one parent
(the files and folders of one folder) form a layering. A module may use
the siblings below it, never one that (directly or through others) uses
it. A child may use its ancestors' own items (a folder's mod.rs holds
what its files share) and a parent its children's.

Edges come from every `crate::`, `super::` and `self::` path outside
comments, strings and `#[cfg(test)]` modules (tests may reach anywhere).
Each path is resolved to the deepest module file it names, and the edge
is counted between the two siblings where the user's and the used
module's paths part. Every strongly connected set of two or more
siblings is reported with the imports that close it; -v lists them all.

No crate does this for us without rust-analyzer's weight (cargo-modules'
`--acyclic` builds it), so it reads the sources directly; it needs only
Python 3's standard library.
"""
import os
import re
import sys
from collections import defaultdict


def module_files(src):
    """Module path (a tuple of names; () for the crate root) -> file."""
    mods = {}
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(root, f)
            rel = os.path.relpath(path, src)[:-3].split(os.sep)
            if rel[-1] in ("mod", "lib", "main"):
                rel = rel[:-1]
            mods[tuple(rel)] = path
    return mods


def code_of(text):
    """`text` without comments and string contents."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and not re.match(r"\w", text[i - 1:i] or " "):
            m = re.match(r'r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            i = n if j < 0 else j + len(end)
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]):
            m = re.match(r"'(\\.|[^\\'])'", text[i:])
            i += m.end()
            out.append("' '")
        else:
            out.append(c)
            i += 1
    return "".join(out)


TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*([;{])")


def without_tests(code):
    """`code` without inline `#[cfg(test)] mod x { ... }` blocks, and the
    names of `#[cfg(test)] mod x;` file modules."""
    out, skipped, i = [], set(), 0
    while True:
        m = TEST_MOD.search(code, i)
        if not m:
            out.append(code[i:])
            return "".join(out), skipped
        out.append(code[i:m.start()])
        if m.group(2) == ";":
            skipped.add(m.group(1))
            i = m.end()
            continue
        j, depth = m.end(), 1
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        i = j


def split_top(body):
    parts, depth, cur = [], 0, ""
    for ch in body:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def use_paths(tree):
    """The paths a `use` tree names: `a::{b, c::{d}}` -> a::b, a::c::d."""
    tree = re.sub(r"\s+", "", tree)
    m = re.match(r"^(.*?)(?:::)?\{(.*)\}$", tree)
    if not m:
        return [tree.split("as", 1)[0] if re.search(r"\bas\b", tree) else tree]
    prefix, out = m.group(1), []
    for part in split_top(m.group(2)):
        for p in use_paths(part):
            if p == "self":
                out.append(prefix)
            else:
                out.append(f"{prefix}::{p}" if prefix else p)
    return out


def references(module, code):
    """The module paths `code` (of `module`) names."""
    paths = []
    for m in re.finditer(r"\buse\s+((?:crate|super|self)\b[^;]*);", code):
        paths += use_paths(m.group(1))
    paths += re.findall(r"(?<![\w$])((?:crate|super)(?:::\w+)+)", code)
    out = set()
    for p in paths:
        segs = [s for s in re.sub(r"\s+", "", p).split("::") if s and s != "*"]
        if not segs:
            continue
        base = list(module)
        if segs[0] == "crate":
            base, segs = [], segs[1:]
        while segs and segs[0] in ("self", "super"):
            if segs[0] == "super":
                base = base[:-1]
            segs = segs[1:]
        out.add(tuple(base + segs))
    return out


def reexports(module, code):
    """Names `module` re-exports (`pub use a::b::Name;`) -> their paths."""
    out = {}
    for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]*);", code):
        for path in use_paths(m.group(1)):
            segs = [s for s in path.split("::") if s]
            if not segs or segs[-1] == "*":
                continue
            if segs[0] not in ("crate", "super", "self"):
                segs = ["self"] + segs  # a path from this module
            (target,) = references(module, "use " + "::".join(segs) + ";") or [None]
            if target is None:
                continue
            alias = re.search(r"\bas\s+(\w+)\s*$", m.group(1))
            out[segs[-1] if not alias else alias.group(1)] = target
    return out


def deepest(path, mods, exported=None, depth=0):
    for k in range(len(path), -1, -1):
        if path[:k] in mods:
            found = path[:k]
            # A name the module re-exports counts as where it lives.
            if exported and depth < 8 and k < len(path):
                target = exported.get(found, {}).get(path[k])
                if target is not None and target != path[:k + 1]:
                    return deepest(target + path[k + 1:], mods, exported, depth + 1)
            return found
    return ()


def check(src, verbose):
    mods = module_files(src)
    codes, test_only = {}, set()
    for module, path in mods.items():
        with open(path, encoding="utf-8") as f:
            code, skipped = without_tests(code_of(f.read()))
        codes[module] = code
        test_only |= {module + (s,) for s in skipped}
    # A file under a test-only module is test code.
    live = {m for m in mods if not any(m[:k] in test_only for k in range(1, len(m) + 1))}
    exported = {m: reexports(m, codes[m]) for m in mods}
    edges = defaultdict(lambda: defaultdict(list))  # parent -> (a, b) -> why
    for module in sorted(live):
        for ref in sorted(references(module, codes[module])):
            target = deepest(ref, mods, exported)
            k = 0
            while k < min(len(module), len(target)) and module[k] == target[k]:
                k += 1
            if k == len(module) or k == len(target):
                continue  # an ancestor or a descendant
            edges[module[:k]][(module[k], target[k])].append(
                f"{'/'.join(module)} uses {'::'.join(ref)}")
    cycles = 0
    for parent in sorted(edges):
        graph = defaultdict(set)
        for a, b in edges[parent]:
            graph[a].add(b)
        for comp in strongly_connected(graph):
            cycles += 1
            where = "::".join(parent) or "the crate root"
            print(f"{src}: modules of {where} use each other in a circle: {', '.join(sorted(comp))}")
            for (a, b), why in sorted(edges[parent].items()):
                if a in comp and b in comp:
                    shown = why if verbose else why[:2]
                    more = "" if verbose or len(why) <= 2 else f" (+{len(why) - 2} more)"
                    print(f"    {a} -> {b}: {'; '.join(shown)}{more}")
    return cycles


def strongly_connected(graph):
    """Tarjan's algorithm, iterative; sets of two or more nodes."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    nodes = sorted(set(graph) | {w for vs in graph.values() for w in vs})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(comp)
    return out


def main(argv):
    verbose = "-v" in argv
    srcs = [a for a in argv if a != "-v"]
    if not srcs:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    total = sum(check(s.rstrip("/"), verbose) for s in srcs)
    if total:
        print(f"check-cycles: {total} circle(s); move the shared piece below both modules")
        return 1
    print(f"check-cycles: no module cycles in {', '.join(srcs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
