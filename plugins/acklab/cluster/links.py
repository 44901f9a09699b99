"""Node-to-node link faults on one host, with iptables and cgroups; clients are never cut.

Every node listens on 127.0.0.1 and Kafka does not bind the source address of the connections a
node opens (to another node's INTERNAL or CONTROLLER listener), so they all come from 127.0.0.1 and
addresses cannot tell nodes apart. Processes can:

- each node runs in its own cgroup (v2), `<LinkState.cgroup>/node-<id>`, placed when it starts;
- the cluster's chain, jumped to from OUTPUT by a rule whose comment names the cluster folder,
  marks each new connection with the node that opened it (CONNMARK bits 24-31, from
  `-m cgroup --path` of the opening socket), so both directions of it carry the mark;
- a cut from node A to node B is a fault chain dropping the packets A sends to B: those of
  connections A opened to a port B listens on (original direction), and those A answers on
  connections B opened to a port A listens on (reply direction). Every packet on loopback passes
  OUTPUT exactly once, so that is the only hook used.

The fault proxy, admin clients and producers are in no node cgroup: their connections carry no
mark, so clients still reach a node cut off from the others. Only loopback traffic is touched.
Everything created is recorded in the cluster state first (`LinkState`) and removed by `remove`;
`reap_strays` removes what a cluster whose folder is gone or torn down left behind.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import logging
import os
import secrets
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from acklab.cluster.errors import ClusterStartError
from acklab.cluster.state import STATE_FILE, ClusterState, LinkState, NodeState

log = logging.getLogger(__name__)

CHAIN_PREFIX = "ACKLAB-"  # the cluster's chain; its fault chains are `<chain>-<hex>`
CGROUP_PREFIX = "acklab-"  # the cluster's cgroup, directly under the cgroup2 root
COMMENT_PREFIX = "acklab "  # + the cluster folder, on the OUTPUT jump
MARK_SHIFT, MARK_MASK = 24, 0xFF000000


@functools.cache
def unavailable() -> str | None:
    """Why node-to-node link faults cannot run on this host, or None (asked once per process)."""
    if os.geteuid() != 0:
        return "they need root (iptables rules and cgroups)"
    if shutil.which("iptables") is None:
        return "iptables is not installed (`make setup` installs it when run as root)"
    if cgroup2_root() is None:
        return "no cgroup v2 hierarchy is mounted"
    probe = subprocess.run(["iptables", "-w", "5", "-S", "OUTPUT"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"iptables does not work here ({probe.stderr.strip()})"
    return None


def cgroup2_root() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on hybrid hosts)."""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            return Path(fields[1])
    return None


def plan(root: Path, cluster_id: str, node_ids: Sequence[int]) -> LinkState:
    """The names of a cluster's link control resources (nothing is created)."""
    cgroups = cgroup2_root()
    if cgroups is None:
        raise ClusterStartError("node-to-node link faults: no cgroup v2 hierarchy is mounted")
    tag = hashlib.sha1(f"{root}\0{cluster_id}".encode()).hexdigest()[:10]
    return LinkState(
        chain=CHAIN_PREFIX + tag,
        cgroup=cgroups / (CGROUP_PREFIX + tag),
        marks={node_id: (index + 1) << MARK_SHIFT for index, node_id in enumerate(node_ids)},
    )


class Links:
    """Link control of one provisioned cluster; works from any process that loaded its state."""

    def __init__(self, state: LinkState, nodes: Sequence[NodeState], root: Path) -> None:
        self.state, self._root = state, root
        self._ports = {n.node_id: [p for p in (n.client_port, n.direct_port, n.internal_port, n.controller_port) if p] for n in nodes}

    def install(self) -> None:
        """The cluster's chain and its OUTPUT jump, a cgroup and a connection-marking rule per node.
        Before any node starts: a connection opened before its node's rule has no mark."""
        chain = self.state.chain
        _iptables("-N", chain)
        _iptables("-A", "OUTPUT", "-m", "comment", "--comment", f"{COMMENT_PREFIX}{self._root}", "-j", chain)
        for node_id, mark in self.state.marks.items():
            self._cgroup(node_id).mkdir(parents=True, exist_ok=True)
            _iptables(
                "-A", chain, "-m", "conntrack", "--ctstate", "NEW", "-m", "cgroup", "--path", self._cgroup_path(node_id),
                "-j", "CONNMARK", "--set-mark", f"{mark:#x}/{MARK_MASK:#x}",
            )

    def place(self, node_id: int, pids: Iterable[int]) -> None:
        """Move a (re)started node's processes into its cgroup; fail if one did not arrive."""
        procs = self._cgroup(node_id) / "cgroup.procs"
        expected = f"0::/{self._cgroup_path(node_id)}"
        for pid in pids:
            try:
                procs.write_text(str(pid))
                membership = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
            except (ProcessLookupError, FileNotFoundError):
                continue  # exited meanwhile: nothing to classify
            if expected not in membership:
                raise ClusterStartError(f"process {pid} of node {node_id} is not in {procs.parent}: {membership}")

    def cut(self, pairs: Iterable[tuple[int, int]], probability: float = 1.0) -> str:
        """Drop (a `probability` share of) the packets of each (sender, receiver) node pair until
        `heal`; returns the fault chain. The chain is complete before it is jumped to."""
        fault = f"{self.state.chain}-{secrets.token_hex(3)}"
        sample = ["-m", "statistic", "--mode", "random", "--probability", f"{probability:g}"] if probability < 1 else []
        _iptables("-N", fault)
        for sender, receiver in sorted(set(pairs)):
            for opener, direction, ports, port_flag in (
                (sender, "ORIGINAL", self._ports[receiver], "--dports"),  # the sender's own connections
                (receiver, "REPLY", self._ports[sender], "--sports"),  # its answers on the receiver's
            ):
                _iptables(
                    "-A", fault, "-p", "tcp", "-m", "connmark", "--mark", f"{self.state.marks[opener]:#x}/{MARK_MASK:#x}",
                    "-m", "conntrack", "--ctdir", direction, "-m", "multiport", port_flag, ",".join(map(str, ports)),
                    *sample, "-j", "DROP",
                )
        _iptables("-A", self.state.chain, "-j", fault)
        return fault

    def dropped(self, fault: str) -> int:
        """Packets the fault chain has dropped so far."""
        listing = _iptables("-L", fault, "-n", "-v", "-x").splitlines()[2:]
        return sum(int(line.split()[0]) for line in listing if line.strip())

    def heal(self, fault: str) -> None:
        """Stop dropping (the jump goes first, at once) and delete the fault chain."""
        _iptables("-D", self.state.chain, "-j", fault, check=False)
        _iptables("-F", fault, check=False)
        _iptables("-X", fault, check=False)

    def _cgroup(self, node_id: int) -> Path:
        return self.state.cgroup / f"node-{node_id}"

    def _cgroup_path(self, node_id: int) -> str:
        """The node's cgroup relative to the cgroup2 root, as `-m cgroup --path` and /proc/<pid>/cgroup name it."""
        return f"{self.state.cgroup.name}/node-{node_id}"


def remove(state: LinkState, root: Path) -> None:
    """Remove the OUTPUT jump, the cluster's chain and fault chains, and its cgroups (any process
    still in one goes back to the cgroup2 root first); idempotent, also for half-created state."""
    if shutil.which("iptables") is None:
        log.warning("iptables is not installed: cannot remove the rules of %s (chain %s)", root, state.chain)
    else:
        _remove_chains(state.chain)
    _remove_cgroup(state.cgroup)


def reap_strays() -> list[str]:
    """Remove the chains and cgroups of clusters whose folder is gone or torn down (the reaper
    tears down orphaned clusters, link control included, from their `cluster.json`); describe
    what was removed. Cgroups whose chain is gone are removed once empty."""
    if os.geteuid() != 0 or shutil.which("iptables") is None or (cgroups := cgroup2_root()) is None:
        return []
    removed = []
    chains = set()
    for args in _rules():
        if args[:2] != ["-A", "OUTPUT"] or "-j" not in args or not args[args.index("-j") + 1].startswith(CHAIN_PREFIX):
            continue
        chain = args[args.index("-j") + 1]
        chains.add(chain)
        comment = args[args.index("--comment") + 1] if "--comment" in args else ""
        folder = Path(comment.removeprefix(COMMENT_PREFIX))
        if comment.startswith(COMMENT_PREFIX) and not _running(folder, chain):
            _remove_chains(chain)
            _remove_cgroup(cgroups / (CGROUP_PREFIX + chain.removeprefix(CHAIN_PREFIX)))
            chains.discard(chain)
            removed.append(f"{chain} ({folder})")
    for cgroup in sorted(cgroups.glob(f"{CGROUP_PREFIX}*")):
        if CHAIN_PREFIX + cgroup.name.removeprefix(CGROUP_PREFIX) not in chains and not _populated(cgroup):
            _remove_cgroup(cgroup)
            removed.append(str(cgroup))
    return removed


def _running(folder: Path, chain: str) -> bool:
    """Whether the cluster in `folder` is running and owns `chain`."""
    try:
        state = ClusterState.load(folder) if (folder / STATE_FILE).exists() else None
    except (ValueError, OSError):
        return False
    return state is not None and state.status == "running" and state.links is not None and state.links.chain == chain


def _remove_chains(chain: str) -> None:
    rules = _rules()
    for args in rules:
        if args[:2] == ["-A", "OUTPUT"] and args[-2:] == ["-j", chain]:
            _iptables("-D", *args[1:], check=False)
    ours = [args[1] for args in rules if args[:1] == ["-N"] and (args[1] == chain or args[1].startswith(f"{chain}-"))]
    for name in ours:  # flush all first: the cluster's chain jumps to its fault chains
        _iptables("-F", name, check=False)
    for name in ours:
        _iptables("-X", name, check=False)


def _remove_cgroup(cgroup: Path) -> None:
    if not cgroup.name.startswith(CGROUP_PREFIX) or cgroup.parent != cgroup2_root() or not cgroup.is_dir():
        return
    home = cgroup.parent / "cgroup.procs"
    for child in [*sorted(p for p in cgroup.iterdir() if p.is_dir()), cgroup]:
        for attempt in range(50):  # a process just killed may take a moment to leave its cgroup
            for pid in (child / "cgroup.procs").read_text().split() if child.exists() else ():
                with contextlib.suppress(OSError):
                    home.write_text(pid)
            try:
                child.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError as exc:
                if exc.errno != errno.EBUSY or attempt == 49:
                    raise
                time.sleep(0.1)


def _populated(cgroup: Path) -> bool:
    return any((path / "cgroup.procs").read_text().strip() for path in (cgroup, *cgroup.rglob("*")) if path.is_dir())


def _rules() -> list[list[str]]:
    """Every rule and chain of the filter table, as `iptables -S` arguments."""
    return [shlex.split(line) for line in _iptables("-S").splitlines()]


def _iptables(*args: str, check: bool = True) -> str:
    result = subprocess.run(["iptables", "-w", "10", *args], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise RuntimeError(f"iptables {shlex.join(args)}: {result.stderr.strip()}")
    return result.stdout
