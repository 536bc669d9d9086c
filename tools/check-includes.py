#!/usr/bin/env python3
"""Checks the include graph of src/ against the layering (docs/style.md, the brief):

    src/basic  ->  src/shared  ->  src/{api,node,agent,cli,gw}

basic includes only basic; shared includes basic and shared; a program includes
basic, shared and its own directory, never another program's. Includes are
written from src/ ("shared/http-util.h"); a bare name ("routes.c") resolves to
the including file's directory, and the protobuf-c headers generated from
proto/ into src/agent/pb belong to the agent. Anything else that cannot be
resolved fails too, so a new kind of include gets a decision rather than a
pass. Prints every violation as FILE:LINE and exits 1 if there is one.

tools/check-includes.py [FILE...]  (default: every tracked file under src/)
"""
import os
import re
import subprocess
import sys

LAYERS = {"basic": 0, "shared": 1}
PROGRAMS = ("api", "node", "agent", "cli", "gw")
# Headers one program offers others (the brief): space-gw's pure policy model,
# linked by the api and the node to validate policies where they are given.
EXPORTED = {"gw/policy.h": ("api", "node")}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


def layer_of(d):
    return LAYERS.get(d, 2 if d in PROGRAMS else None)


def allowed(src, dst):
    """Returns None if src (a directory under src/) may include from dst, else why not."""
    if src == dst:
        return None
    ls, ld = layer_of(src), layer_of(dst)
    if ld > ls:
        return f"{src} is below {dst} in the layering (basic -> shared -> programs)"
    if ls == 2 and ld == 2:
        return f"programs do not include each other ({src} -> {dst})"
    return None


def resolve(path, kind, target):
    """The src/ directory an include names, None for a system header, or raise ValueError."""
    first = target.split("/", 1)[0]
    if "/" in target and (first in LAYERS or first in PROGRAMS):
        return first
    if kind == "<":
        return None
    here = os.path.dirname(path)
    if "/" not in target and os.path.exists(os.path.join(here, target)):
        return here.split("/")[1]
    if "/" not in target and target.endswith(".pb-c.h"):
        return "agent"
    raise ValueError(f'cannot tell which layer "{target}" belongs to; include it from src/ '
                     '("dir/name.h")')


def main(argv):
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    if argv:
        files = argv
    else:
        out = subprocess.run(["git", "ls-files", "--", "src/*.c", "src/*.h"], check=True,
                             capture_output=True, text=True).stdout
        files = out.split()
    bad = 0
    for path in files:
        parts = path.split("/")
        if len(parts) < 3 or parts[0] != "src" or layer_of(parts[1]) is None:
            print(f"{path}: not in a known src/ directory ({', '.join([*LAYERS, *PROGRAMS])})")
            bad += 1
            continue
        src = parts[1]
        with open(path, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                try:
                    dst = resolve(path, m.group(1), m.group(2))
                except ValueError as e:
                    print(f"{path}:{n}: {e}")
                    bad += 1
                    continue
                why = dst and allowed(src, dst)
                if why and src in EXPORTED.get(m.group(2), ()):
                    why = None
                if why:
                    print(f"{path}:{n}: includes {m.group(2)}: {why}")
                    bad += 1
    if bad:
        print(f"check-includes: {bad} violation(s) in {len(files)} files", file=sys.stderr)
        return 1
    print(f"check-includes: {len(files)} files follow basic -> shared -> programs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
