"""Sets a TCK run's outcomes against the allow-list (interop/tck/run.sh).

Usage: compare.py RESULTS_JSON ALLOWLIST_TOML [--seconds N]

RESULTS_JSON is what tck_plugin.py wrote (node id -> outcome, message).
Prints the counts (overall and per binding), every failure with its message,
and the allow-list's state; exits 0 when every failure is allow-listed,
1 when one is not, 2 when the inputs are unusable (no tests ran, a malformed
allow-list).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from collections import Counter

BINDINGS = ("jsonrpc", "http_json", "grpc")
REQUIRED_KEYS = ("requirement", "tests", "spec", "reason", "upstream")


def binding_of(nodeid: str) -> str:
    """The binding a TCK test exercises, from its node id ("card" for the
    agent card tests, "common" for the binding-neutral ones)."""
    path, _, rest = nodeid.partition("::")
    param = re.search(r"(?:\[|-)(grpc|jsonrpc|http_json)\]$", rest)
    if param:
        return param.group(1)
    for b in BINDINGS:
        if f"/{b}/" in path:
            return b
    name = rest.split("[")[0]
    if re.search(r"(_grpc$|::TestGrpc)", "::" + name):
        return "grpc"
    if re.search(r"(_jsonrpc$|::TestJsonRpc)", "::" + name):
        return "jsonrpc"
    if re.search(r"(_rest$|_http_json$|::TestRest)", "::" + name):
        return "http_json"
    if "/agent_card/" in path:
        return "card"
    return "common"


def load_allowlist(path: str) -> dict[str, dict]:
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    allowed: dict[str, dict] = {}
    for i, entry in enumerate(doc.get("allow", [])):
        missing = [k for k in REQUIRED_KEYS if not entry.get(k)]
        if missing:
            raise ValueError(f"allow-list entry {i + 1} lacks {', '.join(missing)}")
        for test in entry["tests"]:
            if test in allowed:
                raise ValueError(f"allow-list names {test} twice")
            allowed[test] = entry
    return allowed


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("results")
    parser.add_argument("allowlist")
    parser.add_argument("--seconds", type=float, default=None)
    args = parser.parse_args()

    try:
        allowed = load_allowlist(args.allowlist)
    except (OSError, ValueError, tomllib.TOMLDecodeError) as e:
        print(f"[tck] unusable allow-list {args.allowlist}: {e}", file=sys.stderr)
        return 2
    try:
        with open(args.results, encoding="utf-8") as f:
            results: dict[str, dict] = json.load(f)
    except (OSError, ValueError) as e:
        print(f"[tck] no results from the TCK run ({args.results}): {e}", file=sys.stderr)
        return 2
    if not results:
        print("[tck] the TCK ran no test", file=sys.stderr)
        return 2

    totals: Counter[str] = Counter()
    per_binding: dict[str, Counter[str]] = {}
    unexpected: list[tuple[str, str]] = []
    tolerated: list[tuple[str, str]] = []
    for nodeid, r in sorted(results.items()):
        outcome = r["outcome"]
        if outcome == "failed":
            if nodeid in allowed:
                outcome = "allowed"
                tolerated.append((nodeid, r["message"]))
            else:
                unexpected.append((nodeid, r["message"]))
        elif outcome == "xpassed":
            outcome = "passed"
        totals[outcome] += 1
        per_binding.setdefault(binding_of(nodeid), Counter())[outcome] += 1

    def counts(c: Counter[str]) -> str:
        text = (
            f"{c['passed']} passed, {c['failed']} failed, "
            f"{c['allowed']} failed on the allow-list, {c['skipped']} skipped"
        )
        if c["xfailed"]:
            text += f", {c['xfailed']} xfailed (SHOULD-level)"
        return text

    print()
    print("== TCK results against interop/tck/allowlist.toml")
    for b in (*BINDINGS, "common", "card"):
        if b in per_binding:
            print(f"  {b:<9} {counts(per_binding[b])}")
    if tolerated:
        print("failed, on the allow-list (the TCK's expectation contradicts the spec v1.0.1):")
        entries: dict[int, list[str]] = {}
        for nodeid, _ in tolerated:
            entries.setdefault(id(allowed[nodeid]), []).append(nodeid)
        for nodeids in entries.values():
            entry = allowed[nodeids[0]]
            print(f"  {entry['requirement']}: {entry['spec']}")
            print(f"    upstream: {entry['upstream']}")
            for nodeid in nodeids:
                print(f"    {nodeid}")
    stale = [t for t in allowed if t in results and results[t]["outcome"] in ("passed", "xpassed")]
    if stale:
        print("on the allow-list but passed (drop the entry if upstream fixed the test):")
        for t in stale:
            print(f"  {t}")
    absent = [t for t in allowed if t not in results]
    if absent:
        print("on the allow-list but not run (renamed upstream, or filtered out):")
        for t in absent:
            print(f"  {t}")
    if unexpected:
        print("FAILED, not on the allow-list:")
        for nodeid, message in unexpected:
            print(f"  {nodeid}\n      {message}")
    took = f" in {args.seconds:.0f} s" if args.seconds is not None else ""
    print(f"TCK: {counts(totals)} ({len(results)} tests{took})")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
