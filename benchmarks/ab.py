"""Same-run A/B: mcpcall over stdio from the working tree (B) against another commit (A).

One benchmark process, pinned to one CPU (inherited by the workers and their
servers). Each variant runs in its own worker process: ``bench_stdio.py``'s
mcpcall client, importing ``mcpcall`` from the working tree or from a detached
worktree of ``REV`` (``/tmp/stdio-<rev>``, made if missing). The same server
(``fast_server.py``) and the raw pipe loop serve both. Rounds are interleaved
(raw, A, B, raw, A, B, ...); the best round of each is kept and the ratios
printed. Comparing two commits measured on separate runs hides a loss on a
busy machine: only ratios from one run count.

    python benchmarks/ab.py --against REV [--with REV] [--rounds 5] [--seconds 1] [--eras legacy,modern] [--threads 8] [--sdk]

With ``--count N`` it measures no time: each variant makes N sequential calls
under a profile hook on every thread (caller, reader, writer, callbacks,
scheduler) and the function calls per ``call_tool`` are printed: a figure that
no other load on the machine moves (``--top K`` lists the K most called).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import threading

from common import MODES, Worker, add_round_options, interleave, pin_and_announce

HERE = os.path.dirname(os.path.abspath(__file__))
TREE = os.path.dirname(HERE)
BENCH = os.path.join(HERE, "bench_stdio.py")


def checkout(rev: str) -> str:
    """A detached worktree of ``rev`` under /tmp (made once, reused), or ``rev`` itself if it is a folder."""
    if os.path.isdir(rev):
        return os.path.abspath(rev)
    commit = subprocess.run(["git", "-C", TREE, "rev-parse", "--short", rev], check=True, capture_output=True,
                            text=True).stdout.strip()
    path = f"/tmp/stdio-{commit}"
    if not os.path.isdir(path):
        subprocess.run(["git", "-C", TREE, "worktree", "add", "--detach", path, commit], check=True,
                       capture_output=True)
    return path


def start(kind: str, tree: str | None, label: str) -> Worker:
    """A ``bench_stdio.py`` worker of ``kind`` importing mcpcall from ``tree`` (None: the raw loop)."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = tree or ""  # Popen inherits it: the worker's ``import mcpcall`` finds this tree first
    try:
        worker = Worker(BENCH, kind)
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved
    worker.kind = label
    return worker


def count_worker(era: str, calls: int) -> None:
    """In a worker: function calls per ``call_tool``, all threads, as JSON on stdout."""
    from bench_stdio import SERVER
    from common import ARGS

    import mcpcall

    per_thread: dict[int, collections.Counter[str]] = {}
    on = [False]
    ident = threading.get_ident

    def hook(frame: object, event: str, arg: object) -> None:
        if not on[0] or event not in ("call", "c_call"):
            return
        counts = per_thread.get(ident())
        if counts is None:
            counts = per_thread[ident()] = collections.Counter()
        if event == "call":
            code = frame.f_code  # type: ignore[attr-defined]
            counts[f"{os.path.basename(code.co_filename)}:{code.co_name}"] += 1
        else:
            counts[f"<c> {getattr(arg, '__qualname__', arg)}"] += 1

    threading.setprofile(hook)  # every thread started from here on: the client's own
    sys.setprofile(hook)
    client = mcpcall.connect(SERVER, protocol=era)
    try:
        for _ in range(200):  # warm: the first call lists the tools, caches fill
            client.call_tool("echo", ARGS)
        on[0] = True
        for _ in range(calls):
            client.call_tool("echo", ARGS)
        on[0] = False
        names = {thread.ident: thread.name.split("-")[1] if thread.name.startswith("mcpcall-") else thread.name
                 for thread in threading.enumerate()}
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        client.close()
    total: collections.Counter[str] = collections.Counter()
    for tid, counts in list(per_thread.items()):
        total.update(counts)
        total[f"<thread> {names.get(tid, 'ended')}"] = sum(counts.values())
    print(json.dumps({name: n / calls for name, n in total.items()}))


def count(trees: dict[str, str], eras: list[str], calls: int, top: int) -> None:
    """Function calls per call of each tree and era (Python functions and builtins)."""
    for era in eras:
        print(f"\n{era}: function calls per call_tool ({calls} calls, every thread)")
        print(f"{'':<8}{'python':>10}{'builtin':>10}{'total':>10}")
        for label, tree in trees.items():
            env = dict(os.environ, PYTHONPATH=tree)
            out = subprocess.run([sys.executable, __file__, "--count-worker", era, str(calls)], env=env, check=True,
                                 capture_output=True, text=True).stdout
            counts: dict[str, float] = json.loads(out.splitlines()[-1])
            threads = {name[9:]: n for name, n in counts.items() if name.startswith("<thread> ")}
            counts = {name: n for name, n in counts.items() if not name.startswith("<thread> ")}
            py = sum(n for name, n in counts.items() if not name.startswith("<c>"))
            c = sum(n for name, n in counts.items() if name.startswith("<c>"))
            where = ", ".join(f"{name} {n:.1f}" for name, n in sorted(threads.items(), key=lambda item: -item[1]))
            print(f"{label:<8}{py:>10.1f}{c:>10.1f}{py + c:>10.1f}   by thread: {where}", flush=True)
            if top:
                for name, n in sorted(counts.items(), key=lambda item: -item[1])[:top]:
                    print(f"{'':<10}{n:>8.2f}  {name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", required=True, action="append", metavar="REV",
                        help="the commit (or a checkout folder) to compare with; repeat it to line up several")
    parser.add_argument("--eras", default="legacy,modern", help="comma-separated: legacy, modern")
    parser.add_argument("--cpu", type=int, default=1, help="the CPU to pin everything to")
    parser.add_argument("--with", dest="new", metavar="REV", help="B is this commit, not the working tree (to bisect)")
    parser.add_argument("--sdk", action="store_true", help="also time the official SDK's client (PyPI mcp)")
    parser.add_argument("--count", type=int, metavar="N", help="count function calls over N calls instead of timing")
    parser.add_argument("--top", type=int, default=0, metavar="K", help="with --count: list the K most called functions")
    parser.add_argument("--count-worker", nargs=2, help=argparse.SUPPRESS)
    add_round_options(parser, rounds=5, seconds=1.0)
    if argv is None and "--count-worker" in sys.argv:
        era, calls = sys.argv[sys.argv.index("--count-worker") + 1:][:2]
        count_worker(era, int(calls))
        return 0
    opts = parser.parse_args(argv)
    olds = {f"A{n if len(opts.against) > 1 else ''}": (rev, checkout(rev)) for n, rev in enumerate(opts.against, 1)}
    new = checkout(opts.new) if opts.new else TREE
    pin_and_announce(opts.cpu, opts.rounds, opts.seconds)
    for label, (rev, path) in olds.items():
        print(f"{label} = {rev} ({path})", flush=True)
    print(f"B = {opts.new or 'the working tree'} ({new})", flush=True)
    eras = opts.eras.split(",")
    if opts.count:
        count({**{label: path for label, (_, path) in olds.items()}, "B": new}, eras, opts.count, opts.top)
        return 0
    workers = [start("raw", None, "raw")] + ([start("sdk", None, "sdk")] if opts.sdk else [])
    for era in eras:
        for label, (_, path) in olds.items():
            workers.append(start(f"mcpcall-{era}", path, f"{label} {era}"))
        workers.append(start(f"mcpcall-{era}", new, f"B {era}"))
    best = {w.kind: {mode: 0.0 for mode in MODES} for w in workers}
    cpu = {w.kind: {mode: float("inf") for mode in MODES} for w in workers}  # least client CPU seconds per call

    def step(worker: Worker, mode: str) -> None:
        calls, elapsed, used = worker.measure(mode, opts.seconds, opts.threads)
        best[worker.kind][mode] = max(best[worker.kind][mode], calls / elapsed)
        cpu[worker.kind][mode] = min(cpu[worker.kind][mode], used / max(calls, 1))

    try:
        interleave(workers, opts.rounds, step)
    finally:
        for worker in workers:
            worker.close()
    par = f"{opts.threads} threads"
    print(f"\n{'calls/s (best)':<16}{'sequential':>12}{par:>12}{'seq/raw':>10}{'par/raw':>10}"
          f"{'CPU µs/call':>14}{'(8 thr)':>9}")
    raw = best["raw"]
    for name, rates in best.items():
        print(f"{name:<16}{rates['seq']:>12,.0f}{rates['par']:>12,.0f}"
              f"{rates['seq'] / raw['seq']:>9.2f}x{rates['par'] / raw['par']:>9.2f}x"
              f"{cpu[name]['seq'] * 1e6:>14.1f}{cpu[name]['par'] * 1e6:>9.1f}")
    if opts.sdk:
        sdk = best["sdk"]
        print(f"\n{'vs the SDK':<16}{'sequential':>12}{par:>12}")
        for name, rates in best.items():
            if name not in ("raw", "sdk"):
                print(f"{name:<16}{rates['seq'] / sdk['seq']:>11.2f}x{rates['par'] / sdk['par']:>11.2f}x")
    print(f"\n{'B/A calls/s':<16}{'sequential':>12}{par:>12}")
    for era in eras:
        b = best[f"B {era}"]
        for label in olds:
            a = best[f"{label} {era}"]
            print(f"{f'B/{label} {era}':<16}{b['seq'] / a['seq']:>11.3f}x{b['par'] / a['par']:>11.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
