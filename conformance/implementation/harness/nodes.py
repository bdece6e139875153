"""Following the cluster's nodes: node hooks and perNode processes for each node there at the start or joining
during the run, stopped when their node goes."""

from __future__ import annotations

import signal

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from conformance.implementation.harness.process import _signal_group
from conformance.implementation.harness.state import ImplementationFailed
from conformance.implementation.harness.stop import STOP_TIMEOUT_S, Stopping
from conformance.implementation.nodefollow import KubeNodes, NodeFollower
from conformance.implementation.profile import ProfileError


class Nodes(Stopping):
    """The per-node parts of the stack, as nodes come and go."""

    @property
    def follows_nodes(self) -> bool:
        """Node hooks or perNode processes: the harness follows the cluster's nodes."""
        prof = self.loaded.profile
        return bool(prof.hooks.node) or any(p.per_node for p in prof.processes)

    def _list_nodes(self) -> str:
        if self.nodes is None:
            self.nodes = KubeNodes(client.CoreV1Api(self._api()))
        names, since = self.nodes.list()
        self._nodes = set(names)
        self.progress(f"following {len(names)} nodes for node hooks and perNode processes")
        return since

    def _follow_nodes(self, since: str) -> None:
        assert self.nodes is not None
        self._follower = NodeFollower(
            self.nodes, set(self._nodes), since, self._node_joined, self._node_gone, self._follow_problem
        ).start()

    def _follow_problem(self, message: str) -> None:
        self.progress(message)

    def _node_hooks(self, node: str) -> None:
        for hook in self.loaded.profile.hooks.node:
            self._run_once(f"{hook.name}@{node}", hook.command, hook.env, hook.timeout_s, "node", node)

    def _node_joined(self, node: str) -> None:
        """A node joined during the run: its node hooks, then its perNode processes (a failure is reported at the
        end of the run: the follower's thread cannot stop the run)."""
        with self._restarting:
            self._nodes.add(node)
            self.progress(f"node {node} joined")
            try:
                self._node_hooks(node)
                for spec in self.loaded.profile.processes:
                    if spec.per_node:
                        self._start(spec, node)
            except (ImplementationFailed, ProfileError, ApiException) as exc:
                if self._still_there(node):
                    self._node_problems.append(f"node {node} joined, its per-node setup failed: {exc}")
                    self.progress(self._node_problems[-1])
                    return
                # The node left while its setup ran (IMP-16 deletes the node it added): a plugin that cannot start
                # for a node that is gone is no fault. Its instances go now; the follower reports the departure next.
                self.progress(f"node {node} left during its per-node setup ({str(exc).splitlines()[0]})")
                gone = [run for run in self.running if run.node == node]
                self.running = [run for run in self.running if run.node != node]
                for run in gone:
                    _signal_group(run.proc, signal.SIGKILL)
                    run.proc.wait()

    def _still_there(self, node: str) -> bool:
        """Whether `node` is still a node of the cluster (asked now; on doubt, yes: the failure is then reported)."""
        assert self.nodes is not None
        try:
            return node in self.nodes.list()[0]
        except (ApiException, OSError):
            return True

    def _node_gone(self, node: str) -> None:
        """A node left: its perNode processes stop (as a DaemonSet's pods go with their node), its holder pods go."""
        with self._restarting:
            self._nodes.discard(node)
            mine = [run for run in self.running if run.node == node]
            self.running = [run for run in self.running if run.node != node]
            self.progress(f"node {node} left: stopping {[run.name for run in mine]}")
            self._node_problems += self._terminate(mine, STOP_TIMEOUT_S)
            self._node_problems += self._remove_holders(node)
