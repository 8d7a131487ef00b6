"""benchmarks/bench_all.py's parts that need no measuring: its options, its table and its targets, on canned figures.

No speed is asserted here (speed is never a test): these check that the one table lists every row it
was given and that each target's ratio, direction and verdict come out right.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture()
def bench_all(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import bench_all

    return bench_all


def figures(calls: float, cpu_us: float) -> dict[str, dict[str, float]]:
    return {"seq": {"calls_per_second": calls, "client_cpu_us": cpu_us},
            "par": {"calls_per_second": calls * 2, "client_cpu_us": cpu_us / 2}}


def canned(bench_all: Any) -> dict[str, Any]:
    """Every row, with mcpcall at 1.2x the raw loop over stdio but only 4x the SDK, and 3x http.client's CPU over HTTP."""
    best = {}
    for row in bench_all.rows_for(sdk=True):
        if row.transport == "stdio":
            calls = {"raw": 1000.0, "mcpcall": 1200.0, "sdk": 300.0}[row.client]
            best[row.label] = figures(calls, 1e6 / calls)
        else:
            cpu = {"http.client": 100.0, "requests": 500.0, "mcpcall": 300.0, "sdk": 1200.0}[row.client]
            best[row.label] = figures(1e6 / cpu, cpu)
    return best


def test_help_runs() -> None:
    done = subprocess.run([sys.executable, str(BENCHMARKS / "bench_all.py"), "--help"],
                          check=False, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    for option in ("--quick", "--no-pin", "--json", "--plot", "--replot"):
        assert option in done.stdout


def test_table_lists_every_row(bench_all: Any) -> None:
    best = canned(bench_all)
    table = bench_all.format_table(best, 8).splitlines()
    assert "8 thr" in table[1]
    rows = [line.split() for line in table[2:] if line]
    assert len(rows) == len(best) == 20
    stdio_mcpcall = next(cells for cells in rows if cells[:4] == ["stdio", "legacy", "mcpcall", "1,200"])
    assert stdio_mcpcall[4:] == ["2,400", "833", "417"]  # calls/s seq, 8 thr; client CPU us/call seq, 8 thr
    assert {" ".join(cells[:-4]) for cells in rows} == set(best)


def test_targets_ratio_direction_and_verdict(bench_all: Any) -> None:
    checks = {c["name"]: c for c in bench_all.targets(canned(bench_all), {"mcpcall": 0.05, "mcp.client.session": 0.5})}
    raw = checks["stdio legacy: calls/s mcpcall/raw"]
    assert raw["values"] == {"seq": pytest.approx(1.2), "par": pytest.approx(1.2)} and raw["goal"] == ">= 1"
    assert raw["met"] == {"seq": True, "par": True}
    assert checks["stdio modern: calls/s mcpcall/sdk"]["met"] == {"seq": False, "par": False}  # 4x < 5x
    floor = checks["http sse modern: client CPU mcpcall/http.client"]
    assert floor["values"]["seq"] == pytest.approx(3.0) and floor["goal"] == "<= 2" and not floor["met"]["seq"]
    sdk = checks["http+sse legacy: client CPU sdk/mcpcall"]
    assert sdk["values"]["seq"] == pytest.approx(4.0) and sdk["met"]["seq"]  # the SDK spends 4x mcpcall's CPU
    imports = checks["import time mcpcall/mcp.client.session"]
    assert imports["values"]["all"] == pytest.approx(0.1) and imports["met"]["all"]
    text = bench_all.format_targets(list(checks.values()), 8)
    verdicts = {line[:50].strip(): line.split()[-1] for line in text.splitlines()[1:]}
    assert verdicts["stdio legacy: calls/s mcpcall/raw"] == "yes"
    assert verdicts["stdio legacy: calls/s mcpcall/sdk"] == "no"


def test_mixed_verdict_names_the_mode_that_meets_it(bench_all: Any) -> None:
    best = canned(bench_all)
    best["stdio legacy mcpcall"]["par"]["calls_per_second"] = 1000.0  # 0.5x the raw loop's 2000 with 8 threads
    checks = [c for c in bench_all.targets(best, {}) if c["name"] == "stdio legacy: calls/s mcpcall/raw"]
    assert bench_all.format_targets(checks, 8).splitlines()[1].endswith("seq only")


def test_plot_is_skipped_with_a_note_without_matplotlib(bench_all: Any, monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    note = bench_all.plot(canned(bench_all), 8, str(tmp_path / "out.png"), "title")
    assert note is not None and "matplotlib" in note
    assert not (tmp_path / "out.png").exists()


@pytest.mark.parametrize("body, expected", [
    ("def summary(quick):\n    return {'stdio': 1.5, 'http-json': 2.5}\n",
     {"10 MB result stdio: peak RSS growth/payload": True, "10 MB result http-json: peak RSS growth/payload": False}),
    ("def summary(quick):\n    raise RuntimeError('no server')\n", None),
])
def test_memory_lines_from_bench_memory(bench_all: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str], body: str, expected: Any) -> None:
    (tmp_path / "bench_memory.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "bench_memory", raising=False)
    try:
        lines = bench_all.memory_lines(quick=True)
    finally:
        sys.modules.pop("bench_memory", None)
    if expected is None:
        assert lines is None and "no server" in capsys.readouterr().out  # a note, and the run goes on
    else:
        assert {line["name"]: line["met"]["all"] for line in lines} == expected
        assert [line["goal"] for line in lines] == ["<= 2", "<= 2"]
