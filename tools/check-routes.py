#!/usr/bin/env python3
"""Checks docs/api/openapi.yaml against the native routes in src/api/routes.c.

Every `/v1/...` route in the table must be documented with the same method,
and every documented path+method must exist in the table. Exits 1 on drift.
No YAML library is needed: the file's `paths:` section is read by indentation.
"""
import re
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent
table = (root / "src/api/routes.c").read_text()
code = {(m.group(1).lower(), m.group(2))
        for m in re.finditer(r'\{\s*EVHTTP_REQ_(\w+),\s*"(/v1/[^"]*)"', table)}

doc = set()
path = None
in_paths = False
for line in (root / "docs/api/openapi.yaml").read_text().splitlines():
    if line.startswith("paths:"):
        in_paths = True
        continue
    if not in_paths:
        continue
    m = re.match(r"^  (/\S+):\s*$", line)
    if m:
        path = m.group(1)
        continue
    m = re.match(r"^    (get|post|put|delete|patch):", line)
    if m and path:
        doc.add((m.group(1), path))

missing = sorted(code - doc)
extra = sorted(doc - code)
for method, p in missing:
    print(f"check-routes: {method.upper()} {p} is served but not in docs/api/openapi.yaml")
for method, p in extra:
    print(f"check-routes: {method.upper()} {p} is documented but not served")
if missing or extra:
    sys.exit(1)
print(f"check-routes: {len(code)} native routes match docs/api/openapi.yaml")
