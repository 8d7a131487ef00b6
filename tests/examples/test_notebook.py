"""examples/notebook.ipynb runs in a real Jupyter kernel, and re-running its connect cell leaves one server.

The kernel runs this interpreter (a kernelspec of the test's own, in a temporary
folder), is a child of the test process, and is shut down by nbclient at the end.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from ..conftest import ROOT, demo_argv, pid_alive

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
# jupyter_client and jupyter_core come with nbclient: imported after the skips
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import ensure_event_loop

import mcpcall
from mcpcall import notebook

NOTEBOOK = ROOT / "examples" / "notebook.ipynb"
KERNEL = "mcpcall-test"


def _demo_servers(parent: int) -> list[int]:
    """pids of live demo server processes whose parent is ``parent``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if int(fields[1]) == parent and b"mcpcall.demo_server" in cmdline and pid_alive(int(entry)):
            found.append(int(entry))
    return found


def _kernel_manager(folder: Path) -> Any:
    """A kernel manager whose only kernelspec runs ``sys.executable`` (whatever specs are installed)."""
    spec = folder / "kernels" / KERNEL
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "mcpcall tests", "language": "python"}))
    specs = KernelSpecManager(kernel_dirs=[str(folder / "kernels")], ensure_native_kernel=False)
    return AsyncKernelManager(kernel_name=KERNEL, kernel_spec_manager=specs)


def _close_jupyter_loop() -> None:
    """Close the event loop jupyter_core's run_sync keeps for this thread (it would hold 3 fds forever)."""
    loop = ensure_event_loop()
    if not loop.is_running():
        loop.close()
        asyncio.set_event_loop(None)


def _tags(cell: Any) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _result(cell: Any) -> dict[str, Any]:
    """The data of a cell's execute_result (what the cell's last expression showed)."""
    results = [out for out in cell.outputs if out.output_type == "execute_result"]
    assert len(results) == 1, cell.outputs
    return dict(results[0]["data"])


@pytest.mark.timeout(180)
def test_notebook_runs_in_a_kernel(tmp_path: Path) -> None:
    nb = nbformat.read(str(NOTEBOOK), as_version=4)
    client = nbclient.NotebookClient(
        nb, km=_kernel_manager(tmp_path), kernel_name=KERNEL, timeout=60, startup_timeout=60,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    servers: dict[str, list[int]] = {}
    try:
        with client.setup_kernel(cleanup_kc=True):  # shuts the kernel down, whatever happens
            kernel = client.km.provisioner.process.pid
            for index, cell in enumerate(nb.cells):
                if cell.cell_type != "code":
                    continue
                runs = 3 if "connect" in _tags(cell) else 1  # re-running the connect cell
                for _ in range(runs):
                    client.execute_cell(cell, index)
                for tag in _tags(cell):
                    servers[tag] = _demo_servers(kernel)
            assert servers["close"] == [], "closing the client and the registry ends their servers"
    finally:
        _close_jupyter_loop()
    assert not pid_alive(kernel)

    cells = {tag: cell for cell in nb.cells for tag in _tags(cell)}
    for cell in nb.cells:
        assert not [out for out in cell.get("outputs", []) if out.output_type in ("error", "stream") and
                    out.get("name") != "stdout"], cell.source
    # Three runs of the connect cell, each showing `client` (so Out[n] keeps every one): one server.
    assert len(servers["connect"]) == 1, servers
    assert "mcpcall.Client 'demo'" in _result(cells["connect"])["text/plain"]
    assert cells["connect"].execution_count == 4  # ran three times (cells 1, then 2, 3, 4)

    html = _result(cells["tools"])["text/html"]
    assert html.startswith('<table class="mcpcall-tools"') and "<code>echo</code>" in html and "<code>add</code>" in html
    assert "<b title=\"required\">*</b>" in html
    assert _result(cells["echo"])["text/plain"] == "'hello from a notebook'"
    add = _result(cells["add"])
    assert "mcpcall-result" in add["text/html"] and "&quot;sum&quot;: 5" in add["text/html"]
    assert _result(cells["sum"])["text/plain"] == "5"
    assert _result(cells["reconnect"])["text/plain"] == "(True, False)"
    assert len(servers["reconnect"]) == 1, servers
    assert "mcp__demo__echo" in _result(cells["registry"])["text/html"]
    assert len(servers["registry"]) == 2, servers  # the registry's own server, and the client's
    assert "'mcp__demo__echo'" in _result(cells["openai"])["text/plain"]
    message = eval(_result(cells["execute"])["text/plain"])  # a dict literal
    assert message == {"role": "tool", "tool_call_id": "call_1", "content": message["content"]}
    assert "42" in message["content"]
    assert _result(cells["close"])["text/plain"] == "True"


# -- the rule behind it, without a kernel -----------------------------------------------------------


class _Shell:
    """What mcpcall.notebook reads of an IPython shell."""

    def __init__(self) -> None:
        self.user_global_ns: dict[str, Any] = {"mcpcall": mcpcall, "DEMO": demo_argv()}
        self.execution_count = 1

    def run(self, code: str) -> dict[str, Any]:
        """Run ``code`` as a cell: in the shell's namespace, one execution count each."""
        exec(compile(code, f"<cell {self.execution_count}>", "exec"), self.user_global_ns)  # noqa: S102 - a cell
        self.execution_count += 1
        return self.user_global_ns


@pytest.fixture
def shell(monkeypatch: pytest.MonkeyPatch) -> Any:
    fake = _Shell()
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: fake))
    yield fake
    for value in list(fake.user_global_ns.values()):
        for one in value if isinstance(value, list) else [value]:
            if isinstance(one, mcpcall.Client):
                one.close()


def test_a_later_cell_replaces_the_earlier_client(shell: _Shell, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "mcpcall.notebook")
    ns = shell.run("client = mcpcall.connect(DEMO, name='demo')\nkept = [client]")  # like Out[n]: still referenced
    first = ns["client"]
    shell.run("client = mcpcall.connect(DEMO, name='demo')")
    assert first.closed and not ns["client"].closed
    assert ns["client"].call_tool("echo", {"message": "x"}).text == "x"
    assert "closing the client an earlier cell connected" in caplog.text and "'demo'" in caplog.text


def test_one_cell_may_connect_many_and_other_names_or_specs_are_kept(shell: _Shell) -> None:
    ns = shell.run("pool = [mcpcall.connect(DEMO, name='demo') for _ in range(2)]")
    assert not any(c.closed for c in ns["pool"])
    shell.run("other = mcpcall.connect(DEMO, name='other')\n"
              "paged = mcpcall.connect(DEMO + ['--page-size', '2'], name='demo')")
    assert not any(c.closed for c in [*ns["pool"], ns["other"], ns["paged"]])
    shell.run("again = mcpcall.connect(DEMO, name='demo')")
    assert all(c.closed for c in ns["pool"]) and not ns["other"].closed and not ns["paged"].closed


def test_only_notebook_code_and_only_when_on(shell: _Shell, monkeypatch: pytest.MonkeyPatch) -> None:
    ns = shell.run("client = mcpcall.connect(DEMO, name='demo')")
    with mcpcall.connect(demo_argv(), name="demo") as library:  # not called from the notebook's namespace
        assert not ns["client"].closed and not library.closed
    monkeypatch.setattr(notebook, "replace_earlier", False)
    first = ns["client"]
    shell.run("client = mcpcall.connect(DEMO, name='demo')")
    assert not first.closed
    first.close()


def test_outside_ipython_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "IPython", raising=False)
    with mcpcall.connect(demo_argv(), name="demo") as one, mcpcall.connect(demo_argv(), name="demo") as two:
        assert not one.closed and not two.closed
    assert notebook.ipython_shell() is None


def test_a_config_entry_connected_in_a_later_cell_replaces_the_earlier_client(shell: _Shell) -> None:
    """``load_config(...)[name].connect()`` in a cell is claimed for that cell, as ``mcpcall.connect`` is."""
    command, *args = demo_argv()
    shell.user_global_ns["CONFIG"] = {"mcpServers": {"demo": {"command": command, "args": args}}}
    ns = shell.run("client = mcpcall.load_config(CONFIG)['demo'].connect()\nkept = [client]")
    first = ns["client"]
    with mcpcall.load_config(ns["CONFIG"])["demo"].connect() as library:  # not called from the notebook's namespace
        assert not first.closed and not library.closed
    shell.run("client = mcpcall.load_config(CONFIG)['demo'].connect()")
    assert first.closed and not ns["client"].closed
