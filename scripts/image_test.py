"""End-to-end test of the container image with podman (``make image-test``, after ``make image``).

The image, steps printed with the seconds since the start:

1. start the NameServer container (the image's own CMD: remoting 9876, gRPC 8081, metrics 9877,
   published on free loopback ports of the host);
2. wait until the image's HEALTHCHECK (``grpc-health-check 127.0.0.1:8081`` inside the container,
   run through ``podman healthcheck run``) passes; check gRPC health and /metrics from the host;
3. start a broker-agent container with the example broker files (examples/ mounted read-only)
   against the NameServer container's address on the container network, gRPC port 8081;
4. look the route of TopicTest up from the host (gRPC PickupTopicRoute) until broker-a is in it,
   and through the remoting port (GET_ROUTEINFO_BY_TOPIC: TOPIC_NOT_EXIST before, SUCCESS now);
5. stop the agent container (SIGTERM): it exits 0 and the route is gone (it unregistered);
6. stop the NameServer container (SIGTERM): it exits 0 within the grace period.

The snapshots extra (pyarrow): the image, which has no pyarrow, answers ``ExportRouteSnapshot`` with
``INTERNAL`` / ``SNAPSHOT_WRITE_FAILED`` (metadata ``extra=snapshots``, the message naming the extra)
and serves as usual; the ``-snapshots`` variant (``--snapshots-image``) writes the snapshot into
its volume. Both images' sizes are printed.

deploy/docker-compose.yml, with podman-compose (the NameServers and broker agents; Prometheus
and Grafana need registry images this test does not pull): ``up`` with the image under test and
the NameServers' gRPC ports published on free loopback ports (an override file), the health
checks, TopicTest's route with broker-a's master and slave on both NameServers, broker-b
registered, ``stop agent-broker-a-s`` (the slave leaves the route on both), ``stop`` (every
container exits 0), ``down -v``.

deploy/kubernetes/namesrv.yaml with ``podman kube play``, as far as podman 4.3 goes (Pods only, no
grpc probes): the StatefulSet's pod template as a Pod, gRPC health from the host, runAsUser, the
read-only root file system, PutKVConfig written to the volume, the remoting port, ``pod stop``
(exit 0 within terminationGracePeriodSeconds).

Every wait has a deadline; containers, networks and volumes (unique names) are removed on success
and on failure. Exit code 0 when every step passed, 1 otherwise (the failing step and the
containers' logs on stderr).

    CONTAINERS_CONF=build/containers.conf python scripts/image_test.py [--image namesrv-grpc:dev]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import grpc
import yaml
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status

from namesrv.v1 import admin_service_pb2 as admin_pb2
from namesrv.v1 import admin_service_pb2_grpc as admin_grpc
from namesrv.v1 import kv_config_service_pb2 as kv_pb2
from namesrv.v1 import kv_config_service_pb2_grpc as kv_grpc
from namesrv.v1 import name_server_service_pb2 as ns_pb2
from namesrv.v1 import name_server_service_pb2_grpc as ns_grpc
from namesrv_grpc.cli import parse_boot_line
from namesrv_grpc.client.remoting import RemotingClient
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
COMPOSE_FILE = ROOT / "deploy" / "docker-compose.yml"
KUBERNETES_NAMESRV = ROOT / "deploy" / "kubernetes" / "namesrv.yaml"
TOPIC = "TopicTest"
BROKER_NAME = "broker-a"
MASTER_ADDR = "127.0.0.1:10911"
SLAVE_ADDR = "127.0.0.1:10921"
GRPC_PORT = 8081
REMOTING_PORT = 9876
METRICS_PORT = 9877
AGENT_METRICS_PORT = 9878
COMPOSE_NAMESRVS = ("namesrv-1", "namesrv-2")
COMPOSE_AGENTS = ("agent-broker-a", "agent-broker-a-s", "agent-broker-b")
COMMAND_TIMEOUT_S = 60.0
"""Upper bound of one podman command (run, inspect, healthcheck run, logs)."""
COMPOSE_TIMEOUT_S = 180.0
"""Upper bound of one podman-compose command (up, stop, down)."""

T = TypeVar("T")
STARTED = time.monotonic()


class StepFailed(Exception):
    """A step of the test did not pass; the message says which and why."""


class Scenario:
    """Shared by both scenarios: the podman command line, the image, timeouts, printed steps."""

    def __init__(self, podman: Sequence[str], image: str, start_timeout: float, grace: float) -> None:
        self.podman = list(podman)
        self.image = image
        self.start_timeout = start_timeout
        self.grace = grace
        self.suffix = f"{os.getpid()}-{secrets.token_hex(3)}"

    def step(self, text: str) -> None:
        print(f"image-test [{time.monotonic() - STARTED:6.1f}s] {text}", flush=True)

    def call(self, command: Sequence[str], timeout: float, env: dict[str, str] | None = None) -> str:
        """Runs ``command``; its stdout. StepFailed on a non-zero exit or after ``timeout`` seconds."""
        result = self.call_status(command, timeout, env)
        if result.returncode != 0:
            raise StepFailed(f"{' '.join(command)}: exit {result.returncode}: {result.stderr.strip()[-2000:]}")
        return result.stdout.strip()

    def call_status(
        self, command: Sequence[str], timeout: float, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Runs ``command`` with output captured. StepFailed after ``timeout`` seconds."""
        try:
            return subprocess.run(
                command, capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired as error:
            raise StepFailed(f"{' '.join(command)}: no answer within {timeout:.0f} s") from error

    def podman_run(self, *args: str, timeout: float = COMMAND_TIMEOUT_S) -> str:
        """``podman ARGS``; its stdout. StepFailed on a non-zero exit or timeout."""
        return self.call([*self.podman, *args], timeout)

    def inspect(self, container: str, template: str) -> str:
        return self.podman_run("container", "inspect", "--format", template, container)

    def running(self, container: str) -> bool:
        return self.inspect(container, "{{.State.Running}}") == "true"

    def exit_code(self, container: str) -> int:
        return int(self.inspect(container, "{{.State.ExitCode}}"))

    def healthy(self, container: str) -> bool:
        """The container's health check passes now (``podman healthcheck run``: exit 0)."""
        return self.call_status([*self.podman, "healthcheck", "run", container], COMMAND_TIMEOUT_S).returncode == 0

    def wait(self, what: str, probe: Callable[[], T | None], timeout: float, *, alive: Sequence[str] = ()) -> T:
        """Calls ``probe`` every 0.5 s until it returns something other than None; StepFailed after
        ``timeout`` seconds, or as soon as one of the containers ``alive`` is no longer running."""
        deadline = time.monotonic() + timeout
        while True:
            result = probe()
            if result is not None:
                return result
            for container in alive:
                if not self.running(container):
                    raise StepFailed(f"{what}: container {container} exited (code {self.exit_code(container)})")
            if time.monotonic() > deadline:
                raise StepFailed(f"{what}: not within {timeout:.0f} s")
            time.sleep(0.5)

    def wait_healthy(self, containers: Sequence[str], timeout: float) -> None:
        for container in containers:
            self.wait(
                f"health check of {container}",
                lambda c=container: True if self.healthy(c) else None,  # type: ignore[misc]
                timeout,
                alive=[container],
            )

    def logs(self, containers: Sequence[str]) -> str:
        parts = []
        for container in containers:
            result = self.call_status([*self.podman, "logs", container], COMMAND_TIMEOUT_S)
            parts.append(f"--- podman logs {container} ---\n{result.stdout}{result.stderr}")
        return "\n".join(parts)

    def run(self) -> None:
        raise NotImplementedError

    def cleanup(self) -> None:
        raise NotImplementedError

    def containers(self) -> list[str]:
        raise NotImplementedError


def route(grpc_port: int) -> ns_pb2.PickupTopicRouteResponse | None:
    """TopicTest's route from the NameServer at 127.0.0.1:grpc_port; None when NOT_FOUND."""
    with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        try:
            response: ns_pb2.PickupTopicRouteResponse = ns_grpc.NameServerServiceStub(channel).PickupTopicRoute(
                ns_pb2.PickupTopicRouteRequest(topic=TOPIC), timeout=5
            )
        except grpc.RpcError as error:
            if error.code() == grpc.StatusCode.NOT_FOUND:
                return None
            raise
    return response


async def remoting_route(remoting_port: int) -> tuple[int, bytes]:
    """GET_ROUTEINFO_BY_TOPIC TopicTest at 127.0.0.1:remoting_port: (response code, body)."""
    async with await RemotingClient.connect("127.0.0.1", remoting_port, timeout=10) as client:
        response = await client.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}, timeout=10)
    return response.code, response.body


def broker_addrs(response: ns_pb2.PickupTopicRouteResponse | None, broker_name: str) -> dict[int, str]:
    """Broker id -> address of ``broker_name`` in a route ({} when no route or no such broker)."""
    if response is None:
        return {}
    for data in response.route.broker_datas:
        if data.broker_name == broker_name:
            return dict(data.broker_addrs)
    return {}


def broker_names(grpc_port: int) -> set[str]:
    """Every broker name the NameServer at 127.0.0.1:grpc_port knows (GetBrokerClusterInfo)."""
    with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        info = ns_grpc.NameServerServiceStub(channel).GetBrokerClusterInfo(
            ns_pb2.GetBrokerClusterInfoRequest(), timeout=5
        )
    return set(info.broker_addr_table)


class ImageScenario(Scenario):
    """The image with ``podman run``: one NameServer container, one broker-agent container."""

    def __init__(self, podman: Sequence[str], image: str, start_timeout: float, grace: float) -> None:
        super().__init__(podman, image, start_timeout, grace)
        self.namesrv = f"namesrv-image-test-{self.suffix}"
        self.agent = f"broker-agent-image-test-{self.suffix}"
        self.grpc_port, self.remoting_port, self.metrics_port = free_ports(3)

    def containers(self) -> list[str]:
        return [self.namesrv, self.agent]

    def cleanup(self) -> None:
        for container in (self.agent, self.namesrv):
            # --volumes: also the anonymous volume of the image's VOLUME /var/lib/namesrv
            self.call_status([*self.podman, "rm", "--force", "--volumes", "--time", "0", container], COMMAND_TIMEOUT_S)

    def stop(self, container: str) -> tuple[int, float]:
        """``podman stop`` (the image's STOPSIGNAL, SIGTERM; SIGKILL after the grace period):
        (exit code, seconds it took)."""
        began = time.monotonic()
        self.podman_run("stop", "--time", str(int(self.grace)), container, timeout=self.grace + COMMAND_TIMEOUT_S)
        return self.exit_code(container), time.monotonic() - began

    def run(self) -> None:
        self.step(f"{self.podman_run('--version')}; image {self.image}")
        size = int(self.podman_run("image", "inspect", "--format", "{{.Size}}", self.image))
        self.step(f"image size {size / 1e6:.0f} MB")

        self.step(
            f"start NameServer container {self.namesrv}: gRPC 127.0.0.1:{self.grpc_port}, "
            f"remoting 127.0.0.1:{self.remoting_port}, metrics 127.0.0.1:{self.metrics_port}"
        )
        self.podman_run(
            "run", "--detach", "--name", self.namesrv,
            "--health-interval", "disable",  # no systemd timers here: `healthcheck run` below
            "--publish", f"127.0.0.1:{self.grpc_port}:{GRPC_PORT}",
            "--publish", f"127.0.0.1:{self.remoting_port}:{REMOTING_PORT}",
            "--publish", f"127.0.0.1:{self.metrics_port}:{METRICS_PORT}",
            self.image,
        )  # fmt: skip
        self.wait_healthy([self.namesrv], self.start_timeout)
        boot = next((line for line in self.podman_run("logs", self.namesrv).splitlines() if "boot success" in line), "")
        ports = parse_boot_line(boot) if boot else {}
        expected = (REMOTING_PORT, GRPC_PORT)
        if (ports.get("remoting"), ports.get("gRPC")) != expected or ports.get("serving processes", 0) < 1:
            raise StepFailed(
                f"boot line {boot!r}: expected remoting port {REMOTING_PORT}, gRPC port {GRPC_PORT} "
                "and the number of serving processes"
            )
        self.step(f"healthy (HEALTHCHECK grpc-health-check 127.0.0.1:8081): {boot}")
        self.check_from_host()
        self.check_remoting(expect_route=False)

        address = self.inspect(self.namesrv, "{{.NetworkSettings.IPAddress}}")
        if not address:
            raise StepFailed(f"{self.namesrv} has no address on the container network")
        self.step(f"start broker-agent container {self.agent}: examples/broker-a.properties -> {address}:{GRPC_PORT}")
        self.podman_run(
            "run", "--detach", "--name", self.agent,
            "--volume", f"{EXAMPLES}:/examples:ro",
            "--health-cmd", json.dumps(["agent-health-check", f"http://127.0.0.1:{AGENT_METRICS_PORT}/metrics"]),
            "--health-interval", "disable",
            self.image,
            "broker-agent",
            "--broker-config=/examples/broker-a.properties",
            "--topics-json=/examples/topics-quickstart.json",
            f"--namesrv-addr={address}:{GRPC_PORT}",
            "--set=brokerIP1=127.0.0.1",
            f"--metrics-port={AGENT_METRICS_PORT}",
        )  # fmt: skip
        found = self.wait(
            f"route of {TOPIC} from the host",
            lambda: route(self.grpc_port),
            self.start_timeout,
            alive=[self.agent, self.namesrv],
        )
        queues = {(q.broker_name, q.read_queue_nums, q.write_queue_nums) for q in found.route.queue_datas}
        addrs = broker_addrs(found, BROKER_NAME)
        if addrs != {0: MASTER_ADDR} or (BROKER_NAME, 4, 4) not in queues:
            raise StepFailed(f"route of {TOPIC}: {BROKER_NAME} addresses {addrs}, queues {sorted(queues)}")
        self.step(f"route of {TOPIC} (gRPC from the host): {BROKER_NAME} {addrs}, queues {sorted(queues)}")
        self.wait_healthy([self.agent], self.start_timeout)
        self.step("agent container healthy (agent-health-check)")
        self.check_remoting(expect_route=True)

        self.step(f"stop {self.agent} (SIGTERM)")
        code, took = self.stop(self.agent)
        if code != 0:
            raise StepFailed(f"{self.agent} exited with {code} after SIGTERM")
        self.step(f"agent exited 0 after {took:.1f} s")
        self.wait(f"the route of {TOPIC} to go", lambda: True if route(self.grpc_port) is None else None, 15)
        self.step(f"route of {TOPIC} gone (NOT_FOUND): the agent unregistered")

        self.step(f"stop {self.namesrv} (SIGTERM, grace {self.grace:.0f} s)")
        code, took = self.stop(self.namesrv)
        if code != 0 or took >= self.grace:
            raise StepFailed(f"{self.namesrv}: exit code {code} after {took:.1f} s (grace {self.grace:.0f} s)")
        if "The Name Server stopped." not in self.podman_run("logs", self.namesrv):
            raise StepFailed(f"{self.namesrv}: no 'The Name Server stopped.' in its log")
        self.step(f"NameServer exited 0 after {took:.1f} s")

    def check_from_host(self) -> None:
        """gRPC health and Prometheus /metrics through the published ports."""
        with grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}") as channel:
            health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        if health.status != health_pb2.HealthCheckResponse.SERVING:
            raise StepFailed(f"gRPC health from the host: {health.status}")
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
        if "namesrv_brokers_live" not in text:
            raise StepFailed(f"{url}: no namesrv_brokers_live")
        self.step(f"from the host: gRPC health SERVING on :{self.grpc_port}, {url} answers")

    def check_remoting(self, *, expect_route: bool) -> None:
        """GET_ROUTEINFO_BY_TOPIC through the published remoting port: SUCCESS with broker-a in the
        body when ``expect_route``, TOPIC_NOT_EXIST otherwise."""
        code, body = asyncio.run(remoting_route(self.remoting_port))
        expected = ResponseCode.SUCCESS if expect_route else ResponseCode.TOPIC_NOT_EXIST
        if code != expected or (expect_route and BROKER_NAME.encode() not in body):
            raise StepFailed(
                f"remoting GET_ROUTEINFO_BY_TOPIC {TOPIC}: code {code} (expected {expected.name}), body {body[:200]!r}"
            )
        self.step(
            f"remoting 127.0.0.1:{self.remoting_port}: GET_ROUTEINFO_BY_TOPIC {TOPIC} -> {expected.name}"
            + (f" ({BROKER_NAME} in the route)" if expect_route else "")
        )


class ComposeScenario(Scenario):
    """deploy/docker-compose.yml with podman-compose: two NameServers and three broker agents."""

    def __init__(self, podman: Sequence[str], image: str, start_timeout: float, grace: float) -> None:
        super().__init__(podman, image, start_timeout, grace)
        self.project = f"namesrv-compose-test-{self.suffix}"
        self.ports = dict(zip(COMPOSE_NAMESRVS, free_ports(len(COMPOSE_NAMESRVS)), strict=True))
        self.tmp = tempfile.TemporaryDirectory(prefix="namesrv-compose-test-")
        self.override = Path(self.tmp.name) / "override.yml"
        # Only the gRPC ports, on free loopback ports: the file's fixed ports may be taken here.
        self.override.write_text(
            "services:\n"
            + "".join(
                f'  {name}:\n    ports: !override\n      - "127.0.0.1:{port}:{GRPC_PORT}"\n'
                for name, port in self.ports.items()
            ),
            encoding="utf-8",
        )
        self.env = {**os.environ, "NAMESRV_IMAGE": image}

    def compose(self, *args: str, timeout: float = COMPOSE_TIMEOUT_S) -> str:
        command = [sys.executable, "-m", "podman_compose", "--podman-path", self.podman[0]]
        command += ["-p", self.project, "-f", str(COMPOSE_FILE), "-f", str(self.override), *args]
        return self.call(command, timeout, self.env)

    def containers(self) -> list[str]:
        """This project's containers (podman-compose names them PROJECT_SERVICE_1)."""
        output = self.call_status(
            [
                *self.podman,
                "ps",
                "--all",
                "--format",
                "{{.Names}}",
                "--filter",
                f"label=io.podman.compose.project={self.project}",
            ],
            COMMAND_TIMEOUT_S,
        ).stdout
        return output.split()

    def container(self, service: str) -> str:
        return f"{self.project}_{service}_1"

    def remove(self) -> None:
        """Removes this project's containers with their anonymous volumes (the image's VOLUME
        /var/lib/namesrv, which ``down --volumes`` leaves behind), then ``down --volumes`` (the
        network, the named volumes)."""
        present = set(self.containers())
        # The agents first: podman-compose makes them depend on the NameServer containers.
        ordered = [self.container(service) for service in (*COMPOSE_AGENTS, *COMPOSE_NAMESRVS)]
        for container in [c for c in ordered if c in present] + sorted(present - set(ordered)):
            self.podman_run("rm", "--force", "--volumes", "--time", "0", container)
        self.compose("down", "--volumes", "--timeout", "0")

    def cleanup(self) -> None:
        try:
            self.remove()
        except StepFailed as error:
            print(f"image-test: compose cleanup: {error}", file=sys.stderr)
        self.tmp.cleanup()

    def run(self) -> None:
        import podman_compose  # type: ignore[import-untyped]  # noqa: F401  (dev dependency)

        services = [*COMPOSE_NAMESRVS, *COMPOSE_AGENTS]
        self.step(f"podman-compose up -d --no-build {' '.join(services)} (project {self.project}, image {self.image})")
        self.compose("up", "--detach", "--no-build", *services)
        namesrvs = [self.container(name) for name in COMPOSE_NAMESRVS]
        agents = [self.container(name) for name in COMPOSE_AGENTS]
        self.wait_healthy(namesrvs, self.start_timeout)
        self.step(f"NameServers healthy (grpc-health-check): gRPC on 127.0.0.1 {sorted(self.ports.values())}")

        both = {0: MASTER_ADDR, 1: SLAVE_ADDR}
        for name, port in self.ports.items():
            self.wait(
                f"{name}: {BROKER_NAME} master and slave in the route of {TOPIC}",
                lambda p=port: True if broker_addrs(route(p), BROKER_NAME) == both else None,  # type: ignore[misc]
                self.start_timeout,
                alive=[*namesrvs, *agents],
            )
            self.wait(
                f"{name}: broker-b registered",
                lambda p=port: True if "broker-b" in broker_names(p) else None,  # type: ignore[misc]
                self.start_timeout,
                alive=[*namesrvs, *agents],
            )
            self.step(f"{name}: route of {TOPIC} has {BROKER_NAME} {both}; broker-b registered")
        self.wait_healthy(agents, self.start_timeout)
        self.step("broker agents healthy (agent-health-check)")

        self.step("podman-compose stop agent-broker-a-s (SIGTERM)")
        self.compose("stop", "--timeout", str(int(self.grace)), "agent-broker-a-s")
        if (code := self.exit_code(self.container("agent-broker-a-s"))) != 0:
            raise StepFailed(f"agent-broker-a-s exited with {code}")
        for name, port in self.ports.items():
            self.wait(
                f"{name}: the slave to leave the route",
                lambda p=port: True if broker_addrs(route(p), BROKER_NAME) == {0: MASTER_ADDR} else None,  # type: ignore[misc]
                15,
            )
        self.step(f"slave gone from the route on both NameServers: {BROKER_NAME} {{0: {MASTER_ADDR!r}}}")

        self.step("podman-compose stop (SIGTERM to every container)")
        began = time.monotonic()
        self.compose("stop", "--timeout", str(int(self.grace)), timeout=COMPOSE_TIMEOUT_S + self.grace)
        took = time.monotonic() - began
        codes = {container: self.exit_code(container) for container in [*namesrvs, *agents]}
        if any(codes.values()) or took >= self.grace:
            raise StepFailed(f"exit codes {codes} after {took:.1f} s (grace {self.grace:.0f} s)")
        self.step(f"every container exited 0 within {took:.1f} s")
        self.remove()
        self.step("podman-compose down --volumes (and the containers' anonymous volumes)")


class KubeScenario(Scenario):
    """deploy/kubernetes/namesrv.yaml with ``podman kube play``, as far as podman 4.3 goes: it plays
    Pods, not StatefulSets, Services or PodDisruptionBudgets, and runs no ``grpc`` probes. So the
    StatefulSet's pod template becomes one Pod (same container, args, ports, security contexts; the
    volume claim template a volume claim; container ports published on free loopback ports) and the
    test checks from outside what the probes and the security context promise."""

    def __init__(self, podman: Sequence[str], image: str, start_timeout: float, grace: float) -> None:
        super().__init__(podman, image, start_timeout, grace)
        self.pod = f"namesrv-kube-test-{self.suffix}"
        self.claim = f"{self.pod}-data"
        self.tmp = tempfile.TemporaryDirectory(prefix="namesrv-kube-test-")
        self.manifest = Path(self.tmp.name) / "pod.yaml"
        self.ports: dict[str, int] = {}
        self.grace_period = grace
        self.run_as_user = -1

    def containers(self) -> list[str]:
        return [f"{self.pod}-namesrv"]

    def write_pod(self) -> dict[str, Any]:
        """The Pod made from the StatefulSet ``namesrv``; returns its namesrv container."""
        documents = [d for d in yaml.safe_load_all(KUBERNETES_NAMESRV.read_text(encoding="utf-8")) if d]
        statefulset = next(d for d in documents if d["kind"] == "StatefulSet" and d["metadata"]["name"] == "namesrv")
        template = statefulset["spec"]["template"]
        spec = dict(template["spec"])
        spec.pop("affinity", None)  # one node here
        self.grace_period = float(spec.get("terminationGracePeriodSeconds", self.grace))
        self.run_as_user = int(spec["securityContext"]["runAsUser"])
        (container,) = spec["containers"]
        container = {**container, "image": self.image}
        free = free_ports(len(container["ports"]))
        container["ports"] = [
            {**port, "hostIP": "127.0.0.1", "hostPort": host}
            for port, host in zip(container["ports"], free, strict=True)
        ]
        self.ports = {port["name"]: port["hostPort"] for port in container["ports"]}
        spec["containers"] = [container]
        (claim_template,) = statefulset["spec"]["volumeClaimTemplates"]
        spec["volumes"] = [
            {"name": claim_template["metadata"]["name"], "persistentVolumeClaim": {"claimName": self.claim}}
        ]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": self.pod, "labels": template["metadata"]["labels"]},
            "spec": spec,
        }
        self.manifest.write_text(yaml.safe_dump(pod), encoding="utf-8")
        return container

    def cleanup(self) -> None:
        if self.manifest.exists():
            self.call_status([*self.podman, "kube", "down", str(self.manifest)], COMMAND_TIMEOUT_S)
        self.call_status([*self.podman, "pod", "rm", "--force", "--ignore", self.pod], COMMAND_TIMEOUT_S)
        self.call_status([*self.podman, "volume", "rm", "--force", self.claim], COMMAND_TIMEOUT_S)
        self.tmp.cleanup()

    def exec(self, *command: str) -> subprocess.CompletedProcess[str]:
        return self.call_status([*self.podman, "exec", self.containers()[0], *command], COMMAND_TIMEOUT_S)

    def run(self) -> None:
        container = self.write_pod()
        name = self.containers()[0]
        self.step(f"podman kube play: the StatefulSet namesrv's pod as Pod {self.pod}, ports {self.ports}")
        self.podman_run("kube", "play", str(self.manifest), timeout=COMPOSE_TIMEOUT_S)
        grpc_port = self.ports["grpc"]

        def serving() -> bool | None:
            try:
                with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
                    status = (
                        health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2).status
                    )
            except grpc.RpcError:
                return None
            return True if status == health_pb2.HealthCheckResponse.SERVING else None

        self.wait("gRPC health SERVING (what the grpc probes ask)", serving, self.start_timeout, alive=[name])
        self.step("gRPC health SERVING on the grpc port (podman runs no grpc probes: checked from the host)")

        uid = self.exec("id", "-u").stdout.strip()
        if uid != str(self.run_as_user):
            raise StepFailed(f"runs as uid {uid!r}, not runAsUser {self.run_as_user}")
        if container["securityContext"].get("readOnlyRootFilesystem") and self.exec("touch", "/probe").returncode == 0:
            raise StepFailed("the root file system is writable despite readOnlyRootFilesystem")
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            kv_grpc.KVConfigServiceStub(channel).PutKVConfig(
                kv_pb2.PutKVConfigRequest(namespace="ORDER_TOPIC_CONFIG", key=TOPIC, value="broker-a:4"), timeout=5
            )
        stored = self.exec("cat", "/var/lib/namesrv/kvConfig.json")
        if stored.returncode != 0 or "broker-a:4" not in stored.stdout:
            raise StepFailed(f"kvConfig.json on the volume: {stored.stdout or stored.stderr}")
        self.step(f"uid {uid}, read-only root file system, PutKVConfig persisted to the volume (kvConfig.json)")
        code, body = asyncio.run(remoting_route(self.ports["remoting"]))
        if code != ResponseCode.TOPIC_NOT_EXIST:
            raise StepFailed(f"remoting GET_ROUTEINFO_BY_TOPIC: code {code}, body {body[:200]!r}")
        self.step(f"remoting port answers: GET_ROUTEINFO_BY_TOPIC {TOPIC} -> TOPIC_NOT_EXIST")

        self.step(f"podman pod stop (SIGTERM, terminationGracePeriodSeconds {self.grace_period:.0f})")
        began = time.monotonic()
        self.podman_run(
            "pod",
            "stop",
            "--time",
            str(int(self.grace_period)),
            self.pod,
            timeout=self.grace_period + COMMAND_TIMEOUT_S,
        )
        took = time.monotonic() - began
        code = self.exit_code(name)
        if code != 0 or took >= self.grace_period:
            raise StepFailed(f"{name}: exit code {code} after {took:.1f} s")
        self.step(f"NameServer exited 0 after {took:.1f} s")
        self.step(
            "not played: the Services, the PodDisruptionBudget and broker-a.yaml (its broker image comes "
            "from a registry); the manifests are validated against the Kubernetes schemas by tests/test_deploy.py"
        )


def export_snapshot(grpc_port: int) -> admin_pb2.ExportRouteSnapshotResponse | grpc.RpcError:
    """``AdminService.ExportRouteSnapshot`` at 127.0.0.1:grpc_port: the response, or the error."""
    with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        try:
            response: admin_pb2.ExportRouteSnapshotResponse = admin_grpc.AdminServiceStub(channel).ExportRouteSnapshot(
                admin_pb2.ExportRouteSnapshotRequest(), timeout=60
            )
        except grpc.RpcError as error:
            return error
    return response


def error_info(error: grpc.RpcError) -> error_details_pb2.ErrorInfo:
    """The ``google.rpc.ErrorInfo`` of a failed call (an empty one when it has none)."""
    status = rpc_status.from_call(error)
    for detail in status.details if status is not None else []:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return info
    return error_details_pb2.ErrorInfo()


class SnapshotsScenario(Scenario):
    """The snapshots extra: a NameServer container of each image, asked for a route snapshot. The
    image (no pyarrow) answers SNAPSHOT_WRITE_FAILED naming the extra; the -snapshots variant
    writes the snapshot into its volume."""

    def __init__(
        self, podman: Sequence[str], image: str, snapshots_image: str, start_timeout: float, grace: float
    ) -> None:
        super().__init__(podman, image, start_timeout, grace)
        self.snapshots_image = snapshots_image
        self.names = {
            image: f"namesrv-slim-test-{self.suffix}",
            snapshots_image: f"namesrv-snapshots-test-{self.suffix}",
        }

    def containers(self) -> list[str]:
        return list(self.names.values())

    def cleanup(self) -> None:
        for container in self.containers():
            self.call_status([*self.podman, "rm", "--force", "--volumes", "--time", "0", container], COMMAND_TIMEOUT_S)

    def start(self, image: str) -> int:
        """A NameServer container of ``image``, healthy; its gRPC port on the host."""
        size = int(self.podman_run("image", "inspect", "--format", "{{.Size}}", image))
        (port,) = free_ports(1)
        self.step(f"{image} ({size / 1e6:.0f} MB): start {self.names[image]}, gRPC 127.0.0.1:{port}")
        self.podman_run(
            "run", "--detach", "--name", self.names[image], "--health-interval", "disable",
            "--publish", f"127.0.0.1:{port}:{GRPC_PORT}", image,
        )  # fmt: skip
        self.wait_healthy([self.names[image]], self.start_timeout)
        return port

    def run(self) -> None:
        port = self.start(self.image)
        answer = export_snapshot(port)
        if not isinstance(answer, grpc.RpcError):
            raise StepFailed(f"{self.image} has no pyarrow but exported a snapshot: {answer}")
        info = error_info(answer)
        message = answer.details() or ""
        if (
            answer.code() != grpc.StatusCode.INTERNAL
            or info.reason != "SNAPSHOT_WRITE_FAILED"
            or dict(info.metadata) != {"extra": "snapshots"}
            or "namesrv-grpc[snapshots]" not in message
        ):
            raise StepFailed(
                f"ExportRouteSnapshot in {self.image}: {answer.code()} {info.reason} {dict(info.metadata)} {message!r}"
            )
        if route(port) is not None:
            raise StepFailed(f"{self.image}: a route of {TOPIC} in an empty NameServer")
        self.step(f"ExportRouteSnapshot without pyarrow: INTERNAL SNAPSHOT_WRITE_FAILED extra=snapshots: {message}")
        self.step("... and the NameServer serves on (PickupTopicRoute answers NOT_FOUND)")

        port = self.start(self.snapshots_image)
        answer = export_snapshot(port)
        if isinstance(answer, grpc.RpcError):
            raise StepFailed(f"ExportRouteSnapshot in {self.snapshots_image}: {answer.code()} {answer.details()}")
        written = (
            f"{answer.snapshot_dir}/snapshots/snapshot_date="
            f"{time.strftime('%Y-%m-%d', time.gmtime(answer.snapshot_time_millis / 1000))}/{answer.file_name}"
        )
        listed = self.call_status(
            [*self.podman, "exec", self.names[self.snapshots_image], "test", "-s", written], COMMAND_TIMEOUT_S
        )
        if listed.returncode != 0:
            raise StepFailed(f"{self.snapshots_image}: no snapshot manifest {written} in the container")
        self.step(f"ExportRouteSnapshot with the snapshots extra: {written} written (schema {answer.schema_version})")


def free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports on 127.0.0.1 (bound together, then released)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def run_scenario(scenario: Scenario) -> bool:
    """Runs one scenario, its containers removed afterwards; False (with logs on stderr) when it failed."""
    try:
        scenario.run()
    except (StepFailed, grpc.RpcError, OSError, TimeoutError, ValueError, ImportError) as error:
        scenario.step(f"FAILED: {error}")
        print(scenario.logs(scenario.containers()), file=sys.stderr)
        return False
    finally:
        scenario.cleanup()
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="image_test", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--image", default="namesrv-grpc:dev", help="image to test (default namesrv-grpc:dev)")
    parser.add_argument(
        "--podman", default="podman --runtime runc", help='podman command line (default "podman --runtime runc")'
    )
    parser.add_argument("--start-timeout", type=float, default=90.0, help="seconds to become healthy (default 90)")
    parser.add_argument("--grace", type=float, default=30.0, help="stop grace period, seconds (default 30)")
    parser.add_argument("--no-compose", action="store_true", help="skip deploy/docker-compose.yml")
    parser.add_argument("--no-kube", action="store_true", help="skip deploy/kubernetes/namesrv.yaml")
    parser.add_argument(
        "--snapshots-image", help="the image's snapshots variant (default: IMAGE-snapshots, as `make image` tags it)"
    )
    parser.add_argument("--no-snapshots", action="store_true", help="skip the snapshots extra (both images)")
    args = parser.parse_args(argv)
    default_conf = ROOT / "build" / "containers.conf"
    if "CONTAINERS_CONF" not in os.environ and default_conf.is_file():
        os.environ["CONTAINERS_CONF"] = str(default_conf)
    # SIGTERM (a CI job's timeout, make interrupted) ends the run through the cleanups.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    podman = args.podman.split()
    image = args.image if "/" in args.image else f"localhost/{args.image}"
    ok = run_scenario(ImageScenario(podman, image, args.start_timeout, args.grace))
    if ok and not args.no_snapshots:
        snapshots_image = args.snapshots_image or f"{args.image}-snapshots"
        snapshots_image = snapshots_image if "/" in snapshots_image else f"localhost/{snapshots_image}"
        ok = run_scenario(SnapshotsScenario(podman, image, snapshots_image, args.start_timeout, args.grace))
    if ok and not args.no_compose:
        ok = run_scenario(ComposeScenario(podman, image, args.start_timeout, args.grace))
    if ok and not args.no_kube:
        ok = run_scenario(KubeScenario(podman, image, args.start_timeout, args.grace))
    print(f"image-test: {'passed' if ok else 'FAILED'}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
