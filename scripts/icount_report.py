"""The table of scripts/icount.sh, its comparison with the baseline, and the
baseline's writing (--write-baseline). Input files: lines "SERVER LABEL N IR"
(one per case, as icount-load measured them). Exit status: 0 within the
tolerance (or not checked), 1 a case over it (--mode check), 2 bad input."""

import argparse
import datetime
import platform
import subprocess
import sys
import tomllib

REFERENCE = "bare jsonrpc:send"


def read(path):
    cases = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 4:
                continue
            server, label, n, ir = parts
            cases[f"{server} {label}"] = int(ir) / int(n)
    return cases


def run(cmd, root):
    try:
        out = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=True)
        return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "unknown"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def write_baseline(path, sections, root):
    lines = [
        "# Instructions per request of the servers, counted by callgrind:",
        "# the baseline of `scripts/icount.sh --check` (CI fails on a case more",
        "# than 3% above it). Made by `scripts/icount.sh --update`: [full] from two",
        "# full runs, [check] from two runs of the check's subset (fewer requests,",
        "# so it has figures of its own); each figure is the larger of the two",
        "# runs, spread_per_case the difference between them (percent): the check",
        "# allows 3% plus twice that spread. Change it only in a commit that says",
        "# why the cost changed.",
        f'commit = "{run(["git", "rev-parse", "HEAD"], root)}"',
        f'toolchain = "{run(["rustc", "--version"], root)}"',
        f'valgrind = "{run(["valgrind", "--version"], root)}"',
        f'cpu = "{cpu_model()}"',
        f'date = "{datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")}"',
        'made = "scripts/icount.sh --update"',
    ]
    for name, runs in sections.items():
        first = runs[0]
        spread = 0.0
        for key, v in first.items():
            for other in runs[1:]:
                if key in other:
                    spread = max(spread, abs(other[key] - v) / v * 100)
        lines.append("")
        lines.append(f"[{name}]")
        lines.append(f"spread_percent = {spread:.3f}")
        keys = [k for k in sorted(first) if not k.startswith("a2a-postgres ")]
        # (a2a-postgres: the database's content varies from run to run.)
        lines.append(f"[{name}.ir_per_request]")
        for key in keys:
            lines.append(f'"{key}" = {round(max(r.get(key, 0) for r in runs))}')
        lines.append(f"[{name}.spread_per_case]")
        for key in keys:
            values = [r[key] for r in runs if key in r]
            lines.append(f'"{key}" = {(max(values) / min(values) - 1) * 100:.2f}')
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", default="full")
    p.add_argument("--baseline", required=True)
    p.add_argument("--tolerance", type=float, default=3.0)
    p.add_argument("--root", default=".")
    p.add_argument("--write-baseline", action="store_true")
    p.add_argument("results", nargs="+")
    args = p.parse_args()

    sections = {}
    for item in args.results:
        name, _, path = item.partition(":")
        sections.setdefault(name, []).append(read(path))
    if args.write_baseline:
        write_baseline(args.baseline, sections, args.root)
    section = next(iter(sections))
    runs = sections[section]
    cases = runs[0]
    if not cases:
        print("icount: no case measured", file=sys.stderr)
        return 2
    base = {}
    spreads = {}
    meta = {}
    try:
        with open(args.baseline, "rb") as f:
            doc = tomllib.load(f)
        base = doc.get(section, {}).get("ir_per_request", {})
        spreads = doc.get(section, {}).get("spread_per_case", {})
        meta = doc
    except FileNotFoundError:
        pass
    except tomllib.TOMLDecodeError as e:
        print(f"icount: {args.baseline}: {e}", file=sys.stderr)
        return 2

    ref_now = cases.get(REFERENCE)
    ref_base = base.get(REFERENCE)
    print(f"Instructions per request (callgrind Ir of the server process, one tokio worker; {section} run)")
    if meta:
        print(f"baseline: {args.baseline} (commit {meta.get('commit', '?')[:12]}, "
              f"{meta.get('toolchain', '?')}, {meta.get('valgrind', '?')})")
    header = f"{'case':<34} {'Ir/request':>12} {'baseline':>12} {'vs base':>8} {'x bare':>7} {'vs base/bare':>12}"
    if len(runs) > 1:
        header += f" {'spread':>7}"
    print(header)
    failed = []
    for key in sorted(cases, key=lambda k: (k.split()[0] != "bare", k)):
        v = cases[key]
        b = base.get(key)
        vs = f"{(v / b - 1) * 100:+.2f}%" if b else "new"
        xbare = f"{v / ref_now:.2f}" if ref_now else "-"
        rel = "-"
        over = False
        if b and ref_now and ref_base:
            rel_change = (v / ref_now) / (b / ref_base) - 1
            rel = f"{rel_change * 100:+.2f}%"
            # A case whose two baseline runs differed is allowed twice that
            # difference on top (the SQLite store's commits fall in or out of
            # a window).
            allowed = args.tolerance + 2 * float(spreads.get(key, 0))
            over = (
                not key.startswith("bare ")
                and (v / b - 1) * 100 > allowed
                and rel_change * 100 > allowed
            )
        line = f"{key:<34} {v:>12.0f} {b if b else '-':>12} {vs:>8} {xbare:>7} {rel:>12}"
        if len(runs) > 1:
            others = [r[key] for r in runs[1:] if key in r]
            sp = max((abs(o - v) / v * 100 for o in others), default=0.0)
            line += f" {sp:>6.2f}%"
        print(line)
        if over:
            failed.append(key)
    if args.mode == "check":
        if not base:
            print(f"icount: no baseline at {args.baseline} (scripts/icount.sh --update)", file=sys.stderr)
            return 2
        if failed:
            for key in failed:
                print(f"FAILED {key}")
            print(
                f"\nicount: {len(failed)} case(s) cost more than their allowance ({args.tolerance:g}% "
                f"plus twice their spread) over the baseline, in instructions and relative to\n"
                "the bare server of the same run.\n"
                "If the change is intended (a feature that costs), or the baseline was made on\n"
                "another toolchain, run `scripts/icount.sh --update` and commit\n"
                "benches/icount-baseline.toml with a message that says why the cost changed.\n"
                "Otherwise find the cause: `valgrind --tool=callgrind` the server and compare\n"
                "with callgrind_annotate (see benches/README.md)."
            )
            return 1
        print(f"\nicount: every case within its allowance ({args.tolerance:g}% plus twice its spread) of the baseline")
    return 0


if __name__ == "__main__":
    sys.exit(main())
