"""deploy/: Prometheus config and alert rules (promtool, offline), the Grafana dashboard's PromQL
(promtool) and provisioning, the Kubernetes manifests (kubernetes-validate, strict schemas), and
docker-compose.yml and the Dockerfile checked structurally, plus the two container health-check
scripts run against real processes and the image scripts' checks. The image itself is built and
run with podman by ``make image-test`` (scripts/image_test.py), which ``make test`` runs."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import kubernetes_validate.utils as kv  # type: ignore[import-untyped]
import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from broker_agent import health_check
from broker_agent.config import load_broker_config
from broker_agent.metrics import AgentMetrics
from namesrv_grpc.core.route_table import RouteInfoManager
from namesrv_grpc.grpc_api.grpc_metrics import GrpcServerMetrics
from namesrv_grpc.metrics import NamesrvMetrics
from namesrv_grpc.processes.serving_process import SERVICE_DESCRIPTORS
from namesrv_grpc.processes.supervisor import process_families
from namesrv_grpc.remoting.remoting_metrics import RemotingMetrics
from namesrv_grpc.runtime.log_limits import suppressed_lines_counter
from namesrv_grpc.runtime.properties import read_properties
from tests.metrics_support import free_port, parse, require_binary
from tests.support import ROOT, NamesrvProcess

DEPLOY = ROOT / "deploy"
PROMETHEUS = DEPLOY / "prometheus"
GRAFANA = DEPLOY / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "namesrv.json"
KUBERNETES = DEPLOY / "kubernetes"
KUBERNETES_VERSIONS = ("1.33", kv.latest_version())
"""Native sidecars are GA from 1.33; the newest schema kubernetes-validate ships."""

ALERTS = {
    "NamesrvDown",
    "NamesrvRouteTableSilent",
    "NamesrvNoLiveBrokers",
    "NamesrvBrokerExpirationBurst",
    "NamesrvBrokerSessionLossBurst",
    "NamesrvLiveBrokersDisagree",
    "NamesrvTopicsDisagree",
    "NamesrvRegistrationLatencyHigh",
    "NamesrvRouteLookupLatencyHigh",
    "NamesrvEventLoopLag",
    "NamesrvAllDown",
    "NamesrvRoutesDiffer",
    "NamesrvBrokerRegistrationConflict",
    "NamesrvSnapshotExportFailed",
    "NamesrvRemotingConnectionsNearLimit",
    "NamesrvClientsCutOff",
    "NamesrvRegistrationsRefused",
    "NamesrvRouteTableSaturated",
    "NamesrvAnswerNearLimit",
    "NamesrvServingProcessRestarted",
    "BrokerAgentDown",
    "BrokerAgentCannotRegister",
}
RUNBOOK = ROOT / "docs" / "runbook.md"
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h", "$instance": ".*", "$agent": ".*"}


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([require_binary("promtool"), *args], capture_output=True, text=True, timeout=60)


# --- Prometheus ---------------------------------------------------------------------------------


@pytest.mark.parametrize("config", ["prometheus.yml", "prometheus-kubernetes.yml"])
def test_promtool_check_config(config: str) -> None:
    result = promtool("check", "config", str(PROMETHEUS / config))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_check_and_test_rules() -> None:
    checked = promtool("check", "rules", str(PROMETHEUS / "alerts.yml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in checked.stdout
    tested = promtool("test", "rules", str(PROMETHEUS / "alerts_test.yml"))
    assert tested.returncode == 0, tested.stdout + tested.stderr


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in load_yaml(PROMETHEUS / "alerts.yml")["groups"] for rule in group["rules"]]


def test_every_alert_has_firing_and_quiet_unit_tests() -> None:
    rules = alert_rules()
    assert {rule["alert"] for rule in rules} == ALERTS
    for rule in rules:
        assert rule["labels"]["severity"] in {"critical", "warning"}, rule["alert"]
        assert {"summary", "description"} <= set(rule["annotations"]), rule["alert"]
    firing: set[str] = set()
    quiet: set[str] = set()
    for test in load_yaml(PROMETHEUS / "alerts_test.yml")["tests"]:
        for case in test["alert_rule_test"]:
            (firing if case["exp_alerts"] else quiet).add(case["alertname"])
    assert firing == ALERTS, "alerts without a test that expects them to fire"
    assert quiet == ALERTS, "alerts without a test that expects them not to fire"


def markdown_anchors(text: str) -> set[str]:
    """GitHub's anchors of the headings of a Markdown text (lower case, spaces to dashes, most
    punctuation dropped)."""
    anchors = set()
    for line in text.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^a-z0-9 _-]", "", title).replace(" ", "-"))
    return anchors


def test_every_alert_links_its_runbook_section() -> None:
    """Each alert's runbook_url points at a section of docs/runbook.md that says what the alert
    means, how to confirm it with namesrv-admin and what to do."""
    runbook = RUNBOOK.read_text(encoding="utf-8")
    anchors = markdown_anchors(runbook)
    sections = re.split(r"^## ", runbook, flags=re.MULTILINE)
    for rule in alert_rules():
        url = rule["annotations"]["runbook_url"]
        path, _, anchor = url.partition("#")
        assert (ROOT / path) == RUNBOOK, rule["alert"]
        assert anchor in anchors, f"{rule['alert']}: no heading for #{anchor}"
        (section,) = [s for s in sections if s.split("\n", 1)[0].strip() == rule["alert"]]
        for part in ("**Means**", "**Confirm**", "**Do**"):
            assert part in section, f"{rule['alert']}: no {part}"
        assert "namesrv-admin" in section, f"{rule['alert']}: no namesrv-admin command to confirm it"


def test_scrape_configs_name_the_jobs_the_alerts_use() -> None:
    for config in ("prometheus.yml", "prometheus-kubernetes.yml"):
        document = load_yaml(PROMETHEUS / config)
        assert document["rule_files"] == ["alerts.yml"]
        assert [job["job_name"] for job in document["scrape_configs"]] == ["namesrv", "broker-agent"]
    jobs = set(re.findall(r'job="([^"]+)"', (PROMETHEUS / "alerts.yml").read_text(encoding="utf-8")))
    assert jobs == {"namesrv", "broker-agent"}


def exported_names() -> set[str]:
    """Every sample name the NameServer and the agent export (in-process registries)."""
    namesrv = NamesrvMetrics(RouteInfoManager())
    grpc_metrics = GrpcServerMetrics(namesrv.registry)
    grpc_metrics.preregister(SERVICE_DESCRIPTORS)
    labels = ("unary", "namesrv.v1.NameServerService", "PickupTopicRoute")
    grpc_metrics.finish(labels, grpc_metrics.start(labels), grpc.StatusCode.OK)  # per-method series: first call
    RemotingMetrics(namesrv.registry).request_handled(105, 0, 0.0001)  # per-code series: first request
    suppressed_lines_counter(namesrv.registry)
    agent = AgentMetrics()
    agent.observe_registration("10.0.0.1:9876", None, 0.01)
    supervisor = CollectorRegistry()  # namesrv's own series (processes/supervisor.py)
    for family in process_families(
        {"supervisor": 1, "route_table": 1, "serving": 2}, 0, {"route_table": 0, "serving": 0}
    ):
        supervisor.register(_Fixed(family))
    names = {"up"}
    for registry in (namesrv.registry, agent.registry, supervisor):
        names |= parse(generate_latest(registry).decode()).names()
    return names


class _Fixed(Collector):
    def __init__(self, family: Metric) -> None:
        self._family = family

    def collect(self) -> Iterator[Metric]:
        yield self._family


def dashboard_exprs() -> dict[str, str]:
    """Every PromQL expression of the dashboard, by "panel title/refId"."""
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    exprs = {}
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            exprs[f"{panel['title']}/{target['refId']}"] = target["expr"]
    return exprs


def test_every_metric_in_alerts_and_dashboard_is_exported() -> None:
    names = exported_names()
    used = set()
    texts = [rule["expr"] for rule in alert_rules()] + list(dashboard_exprs().values())
    for text in texts:
        used |= set(re.findall(r"\b(?:namesrv|broker_agent|grpc_server)_[a-z0-9_]+\b", text))
    assert used, "no metric names found"
    assert used <= names, f"not exported: {sorted(used - names)}"


# --- Grafana ------------------------------------------------------------------------------------


def test_dashboard_promql_checked_by_promtool(tmp_path: Path) -> None:
    """Every expression, with Grafana's variables replaced, as a recording rule for promtool."""
    rules = []
    for index, (where, expr) in enumerate(sorted(dashboard_exprs().items())):
        for variable, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(variable, value)
        assert "$" not in expr, f"{where}: unknown variable in {expr}"
        rules.append({"record": f"dashboard:expr_{index}", "expr": expr})
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}), encoding="utf-8")
    result = promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules)} rules found" in result.stdout


def test_dashboard_panels_and_provisioning() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    panels = dashboard["panels"]
    titles = {panel["title"] for panel in panels}
    for wanted in (
        "Live brokers per NameServer",
        "Route lookups/s",
        "Route lookup p99",
        "Registrations by result",
        "Expirations and session losses",
        "NameServer disagreement",
        "Garbage-collection pause p99 by generation",
        "Event-loop lag p99",
        "Remoting connections and their cap",
        "Remoting connections closed by a bound/s",
        "Remoting reads paused/s by reason",
        "Unfinished frame bytes and suppressed log lines/s",
        "Remoting requests/s by code",
        "Remoting errors/s by request and response code",
        "Remoting request p99 by code",
        "gRPC call p99 by method",
    ):
        assert wanted in titles
    # lookups and registrations are drawn per front door (remoting = RocketMQ's own clients and brokers)
    exprs = dashboard_exprs()
    for where in ("Route lookups/s/A", "Route lookup p99/A", "Route lookup p99/B", "Registration p99/A"):
        assert re.search(r"sum by \(instance, protocol\b", exprs[where]), where
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids))
    datasources = load_yaml(GRAFANA / "provisioning" / "datasources" / "prometheus.yaml")["datasources"]
    assert [(d["type"], d["uid"]) for d in datasources] == [("prometheus", "prometheus")]
    # no hard-coded datasource uid: every panel and query uses the $datasource variable
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert (variables["datasource"]["type"], variables["datasource"]["query"]) == ("datasource", "prometheus")
    assert '"uid": "prometheus"' not in DASHBOARD.read_text(encoding="utf-8")
    for panel in panels:
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
            assert panel["targets"], panel["title"]
            for target in panel["targets"]:
                assert target["datasource"] == panel["datasource"], panel["title"]
    # NameServer and agent variables filter every query of their job
    for name, job in (("instance", "namesrv"), ("agent", "broker-agent")):
        assert variables[name]["type"] == "query"
        assert f'up{{job="{job}"}}' in variables[name]["definition"]
        assert variables[name]["includeAll"] is True
        assert variables[name]["multi"] is True
    for where, expr in dashboard_exprs().items():
        for selector in re.findall(r'\{job="(?:namesrv|broker-agent)"[^}]*\}', expr):
            job = "namesrv" if 'job="namesrv"' in selector else "broker-agent"
            wanted = "$instance" if job == "namesrv" else "$agent"
            assert f'instance=~"{wanted}"' in selector, f"{where}: {selector}"
    # the route digest: one panel per NameServer, repeated over $instance, and the distinct count
    (per_namesrv,) = [p for p in panels if "namesrv_route_table_digest" in str(p.get("targets")) and p.get("repeat")]
    assert per_namesrv["repeat"] == "instance"
    assert "$instance" in per_namesrv["title"]
    assert any("count_values" in t["expr"] for p in panels for t in p.get("targets", []))
    provider = load_yaml(GRAFANA / "provisioning" / "dashboards" / "namesrv.yaml")["providers"][0]
    grafana = load_yaml(DEPLOY / "docker-compose.yml")["services"]["grafana"]
    mounts = dict(volume.split(":")[:2] for volume in grafana["volumes"])
    assert mounts["./grafana/dashboards"] == provider["options"]["path"]
    assert mounts["./grafana/provisioning"] == "/etc/grafana/provisioning"
    assert datasources[0]["url"] == "http://prometheus:9090"


# --- Kubernetes ---------------------------------------------------------------------------------


def manifests() -> list[tuple[str, dict[str, Any]]]:
    documents = []
    for path in sorted(KUBERNETES.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if document:
                documents.append((path.name, document))
    return documents


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_kubernetes_manifests_validate(version: str) -> None:
    documents = manifests()
    kinds = sorted(document["kind"] for _, document in documents)
    namesrv_kinds = ["Namespace", "Service", "Service", "StatefulSet", "PodDisruptionBudget"]
    assert kinds == sorted([*namesrv_kinds, "ConfigMap", "Service", "StatefulSet"])
    for name, document in documents:
        try:
            kv.validate(document, version, strict=True)
        except kv.ValidationError as error:
            pytest.fail(f"{name} {document['kind']}/{document['metadata']['name']}: {error.message}")


def test_kubernetes_validation_rejects_a_broken_manifest() -> None:
    """The validator really looks: a misspelled field and a wrong type are refused."""
    statefulset = next(d for _, d in manifests() if d["kind"] == "StatefulSet")
    misspelled = json.loads(json.dumps(statefulset))
    misspelled["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    wrong_type = json.loads(json.dumps(statefulset))
    wrong_type["spec"]["replicas"] = "two"
    for broken in (misspelled, wrong_type):
        with pytest.raises(kv.ValidationError):
            kv.validate(broken, KUBERNETES_VERSIONS[0], strict=True)


def find(kind: str, name: str) -> dict[str, Any]:
    return next(d for _, d in manifests() if d["kind"] == kind and d["metadata"]["name"] == name)


def test_namesrv_statefulset_headless_service_probes_and_budget() -> None:
    statefulset = find("StatefulSet", "namesrv")
    service = find("Service", statefulset["spec"]["serviceName"])
    assert service["spec"]["clusterIP"] == "None"
    pod = statefulset["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert statefulset["spec"]["replicas"] >= 2
    container = pod["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"remoting": 9876, "grpc": 8081, "metrics": 9877}
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == ports
    client = find("Service", "namesrv-client")
    assert {p["name"]: p["port"] for p in client["spec"]["ports"]} == {"remoting": 9876, "grpc": 8081}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["grpc"]["port"] == ports["grpc"], probe
    assert f"--port={ports['grpc']}" in container["args"]
    assert f"--remoting-port={ports['remoting']}" in container["args"]
    assert f"--metrics-port={ports['metrics']}" in container["args"]
    assert {"cpu", "memory"} <= set(container["resources"]["requests"])
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    budget = find("PodDisruptionBudget", "namesrv")
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert budget["spec"]["minAvailable"] < statefulset["spec"]["replicas"]


def test_the_docs_quote_what_the_manifests_alerts_and_dashboard_hold() -> None:
    """production.md and sizing.md quote the manifest's memory request and limit, production.md
    names every alert of alerts.yml and the dashboard's variables as the JSON has them."""
    container = find("StatefulSet", "namesrv")["spec"]["template"]["spec"]["containers"][0]
    request = container["resources"]["requests"]["memory"]
    limit = container["resources"]["limits"]["memory"]
    assert request.endswith("Mi")
    assert limit.endswith("Mi")
    production = (ROOT / "docs" / "production.md").read_text(encoding="utf-8")
    sizing = (ROOT / "docs" / "sizing.md").read_text(encoding="utf-8")
    quoted = rf"request {request[:-2]} MiB,\s+limit {limit[:-2]} MiB"
    assert re.search(quoted, production), f"production.md does not quote {request}/{limit}"
    assert re.search(quoted, sizing), f"sizing.md does not quote {request}/{limit}"
    workers = next(arg for arg in container["args"] if arg.startswith("--workers="))
    assert f"`{workers}`" in sizing
    for name in (rule["alert"] for rule in alert_rules()):
        assert f"**{name}**" in production, f"production.md does not list the alert {name}"
    dashboard = json.loads((GRAFANA / "dashboards" / "namesrv.json").read_text(encoding="utf-8"))
    variables = ", ".join(v["name"] for v in dashboard["templating"]["list"])
    assert f"(variables: {variables})" in production


@pytest.mark.parametrize(("unit", "instance"), [("namesrv.service", ""), ("broker-agent@.service", "broker-a")])
def test_systemd_units_pass_systemd_analyze_verify(tmp_path: Path, unit: str, instance: str) -> None:
    """deploy/systemd/ as systemd reads it (`systemd-analyze verify`: every key known and valid, the
    command executable), with /opt/namesrv-grpc/bin pointed at this checkout's programs. A broken
    copy is reported, so the check can fail. systemd-analyze comes with `make test-tools`."""
    if shutil.which("systemd-analyze") is None:
        pytest.fail("systemd-analyze missing: make test-tools (scripts/install-podman.sh) installs systemd")
    bin_dir = str(Path(sys.executable).parent) + "/"
    text = (DEPLOY / "systemd" / unit).read_text(encoding="utf-8")
    assert "/opt/namesrv-grpc/bin/" in text
    (tmp_path / unit).write_text(text.replace("/opt/namesrv-grpc/bin/", bin_dir), encoding="utf-8")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / unit).write_text(text.replace("Type=exec", "Type=exek"), encoding="utf-8")
    name = unit.replace("@.", f"@{instance}.")

    def verify(directory: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["systemd-analyze", "verify", f"./{name}"], cwd=directory, capture_output=True, text=True, timeout=60
        )

    done = verify(tmp_path)
    assert (done.returncode, done.stdout + done.stderr) == (0, "")
    assert "Failed to parse service type" in verify(tmp_path / "broken").stderr
    assert "RestartPreventExitStatus=2" in text  # a configuration error (exit 2) is not restarted
    assert "ExecReload=/bin/kill -HUP $MAINPID" in text


def test_broker_pod_runs_the_agent_as_a_native_sidecar(tmp_path: Path) -> None:
    statefulset = find("StatefulSet", "broker-a")
    pod = statefulset["spec"]["template"]["spec"]
    (agent,) = pod["initContainers"]
    assert agent["restartPolicy"] == "Always"
    broker = next(c for c in pod["containers"] if c["name"] == "broker")
    args = dict(arg.split("=", 1) for arg in agent["args"][1:] if "=" in arg)
    assert agent["args"][0] == "broker-agent"
    namesrv = find("StatefulSet", "namesrv")
    namespace = namesrv["metadata"]["namespace"]
    # the agent speaks gRPC: the NameServers' grpc port
    grpc_port = next(
        p["containerPort"] for p in namesrv["spec"]["template"]["spec"]["containers"][0]["ports"] if p["name"] == "grpc"
    )
    assert args["--namesrv-addr"] == f"{namesrv['spec']['serviceName']}.{namespace}.svc.cluster.local:{grpc_port}"
    # broker.conf and topics.json come from volumes the broker mounts too; the agent only reads them
    agent_mounts = {m["mountPath"]: m for m in agent["volumeMounts"]}
    broker_mounts = {m["mountPath"]: m["name"] for m in broker["volumeMounts"]}
    config_dir = str(Path(args["--broker-config"]).parent)
    store_dir = str(Path(args["--topics-json"]).parent.parent)
    for path in (config_dir, store_dir):
        assert agent_mounts[path]["readOnly"] is True
        assert broker_mounts[path] == agent_mounts[path]["name"]
    assert args["--topics-json"].endswith("/config/topics.json")
    ports = {p["name"]: p["containerPort"] for p in agent["ports"]}
    assert args["--metrics-port"] == str(ports["agent-metrics"])
    assert {"cpu", "memory"} <= set(agent["resources"]["requests"])
    # The broker.conf of the ConfigMap is one the agent accepts, and it says where topics.json is.
    config_map = find("ConfigMap", pod["volumes"][0]["configMap"]["name"])
    conf = tmp_path / "broker.conf"
    conf.write_text(config_map["data"]["broker.conf"], encoding="utf-8")
    config = load_broker_config(read_properties(conf), str(conf), namesrv_addr_override="ns:9876", environ={})
    assert str(config.default_topics_json) == args["--topics-json"]
    # Prometheus finds the sidecars through the headless Service's SRV record of the named port.
    service = find("Service", statefulset["spec"]["serviceName"])
    assert service["spec"]["clusterIP"] == "None"
    assert "agent-metrics" in {p["name"] for p in service["spec"]["ports"]}
    k8s_prometheus = load_yaml(PROMETHEUS / "prometheus-kubernetes.yml")
    srv = {job["job_name"]: job["dns_sd_configs"][0]["names"][0] for job in k8s_prometheus["scrape_configs"]}
    assert srv["broker-agent"] == f"_agent-metrics._tcp.{service['metadata']['name']}.{namespace}.svc.cluster.local"
    assert srv["namesrv"] == f"_metrics._tcp.{namesrv['spec']['serviceName']}.{namespace}.svc.cluster.local"


def broker_a_conf(tmp_path: Path) -> dict[str, str]:
    """The broker.conf of broker-a.yaml's ConfigMap, read as a properties file."""
    statefulset = find("StatefulSet", "broker-a")
    config_map = find("ConfigMap", statefulset["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"])
    conf = tmp_path / "broker.conf"
    conf.write_text(config_map["data"]["broker.conf"], encoding="utf-8")
    return dict(read_properties(conf))


def test_broker_registers_itself_on_the_tested_rocketmq_version(tmp_path: Path) -> None:
    """broker-a.yaml runs the RocketMQ version the tests run (tests/rocketmq/), and the broker
    registers itself: namesrvAddr names the NameServers' headless Service on the remoting port,
    resolved to every NameServer pod (fetchNameSrvAddrByDnsLookup). The agent beside it names the
    same Service on the gRPC port; neither sets brokerIP1, so both register the same address."""
    from tests.rocketmq_support import ROCKETMQ_5

    pod = find("StatefulSet", "broker-a")["spec"]["template"]["spec"]
    broker = next(c for c in pod["containers"] if c["name"] == "broker")
    assert broker["image"] == f"apache/rocketmq:{ROCKETMQ_5}"
    pom = (ROOT / "tests" / "rocketmq" / ROCKETMQ_5 / "pom.xml").read_text(encoding="utf-8")
    assert f"<artifactId>rocketmq-broker</artifactId><version>{ROCKETMQ_5}</version>" in pom
    conf = broker_a_conf(tmp_path)
    conf_path = broker["command"][broker["command"].index("-c") + 1]
    assert Path(conf_path).name == "broker.conf"
    namesrv = find("StatefulSet", "namesrv")
    service = find("Service", namesrv["spec"]["serviceName"])
    assert service["spec"]["clusterIP"] == "None"  # the name resolves to every NameServer pod
    host = f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc.cluster.local"
    ports = {p["name"]: p for p in service["spec"]["ports"]}
    container_ports = {
        p["name"]: p["containerPort"] for p in namesrv["spec"]["template"]["spec"]["containers"][0]["ports"]
    }
    assert ports["remoting"]["port"] == container_ports[ports["remoting"]["targetPort"]] == 9876
    assert conf["namesrvAddr"] == f"{host}:{ports['remoting']['port']}"
    assert conf["fetchNameSrvAddrByDnsLookup"] == "true"
    assert int(conf["updateNameServerAddrPeriod"]) <= 60_000
    (agent,) = pod["initContainers"]
    assert f"--namesrv-addr={host}:{ports['grpc']['port']}" in agent["args"]
    assert "brokerIP1" not in conf
    assert not [arg for arg in agent["args"] if "brokerIP1" in arg]


@pytest.mark.slow
def test_broker_a_conf_registers_a_real_broker_through_the_dns_name(tmp_path: Path) -> None:
    """The ConfigMap's broker.conf, with the cluster's DNS name replaced by localhost and the ports
    and store by the test's own, started as a real RocketMQ broker of the tested version: it looks
    the name up (fetchNameSrvAddrByDnsLookup) and registers itself with the NameServer behind it."""
    from tests.rocketmq_support import ROCKETMQ_5, java_processes, require_rocketmq, start_java_broker, wait_registered
    from tests.support import running_namesrv

    require_rocketmq(ROCKETMQ_5)
    conf = broker_a_conf(tmp_path)
    for key in ("listenPort", "storePathRootDir", "storePathCommitLog"):  # the test's own (rocketmq_support)
        del conf[key]
    with running_namesrv(tmp_path / "ns") as server, java_processes() as processes:
        conf["namesrvAddr"] = f"localhost:{server.remoting_port}"
        broker = start_java_broker(ROCKETMQ_5, tmp_path / "broker", conf["namesrvAddr"], conf)
        processes.append(broker)
        assert wait_registered(server.remoting_address, conf["brokerName"]) == broker.addr
        assert "dns lookup address by domain success, domain=localhost" in broker.logs(tail=10_000)


# --- docker-compose.yml and Dockerfile ----------------------------------------------------------


def compose_services() -> dict[str, Any]:
    services: dict[str, Any] = load_yaml(DEPLOY / "docker-compose.yml")["services"]
    return services


def flags(command: list[str]) -> dict[str, list[str]]:
    """``--key=value`` arguments by key."""
    found: dict[str, list[str]] = {}
    for arg in command[1:]:
        key, _, value = arg.partition("=")
        found.setdefault(key, []).append(value)
    return found


def test_compose_services_healthchecks_and_dependencies() -> None:
    services = compose_services()
    namesrvs = {name for name, s in services.items() if s.get("command", [""])[0] == "namesrv"}
    agents = {name for name, s in services.items() if s.get("command", [""])[0] == "broker-agent"}
    assert namesrvs == {"namesrv-1", "namesrv-2"}
    assert {"prometheus", "grafana"} <= set(services)
    for name, service in services.items():
        assert service["healthcheck"]["test"][0] in {"CMD", "CMD-SHELL"}, name
        for dependency, condition in service.get("depends_on", {}).items():
            assert dependency in services, name
            assert condition == {"condition": "service_healthy"}, name
    for name in namesrvs:
        command = flags(services[name]["command"])
        assert command["--port"] == ["8081"]
        assert command["--remoting-port"] == ["9876"]
        assert services[name]["healthcheck"]["test"][1:] == ["grpc-health-check", "127.0.0.1:8081"]
        assert "build" in services[name]
        # the image's variants: NAMESRV_EXTRAS=snapshots builds the one with pyarrow
        assert services[name]["build"]["args"] == {"EXTRAS": "${NAMESRV_EXTRAS:-}"}
        published = {port.rsplit(":", 1)[1] for port in services[name]["ports"]}
        assert published == {"9876", "8081", "9877"}
    # one agent per example broker, with files that exist and a configuration the agent accepts
    brokers = set()
    for name in agents:
        service = services[name]
        assert set(service["depends_on"]) == namesrvs
        assert service["healthcheck"]["test"][1] == "agent-health-check"
        targets = {volume.split(":")[1]: volume.split(":")[0] for volume in service["volumes"]}
        args = flags(service["command"])
        host_dir = (DEPLOY / targets["/examples"]).resolve()
        conf = host_dir / Path(args["--broker-config"][0]).name
        assert (host_dir / Path(args["--topics-json"][0]).name).is_file()
        addrs = args["--namesrv-addr"][0].split(";")
        assert sorted(a.split(":")[0] for a in addrs) == sorted(namesrvs)
        assert {a.split(":")[1] for a in addrs} == {"8081"}, "the agent speaks gRPC"
        overrides = dict(item.split("=", 1) for item in args.get("--set", []))
        properties = {**read_properties(conf), **overrides}
        config = load_broker_config(properties, str(conf), namesrv_addr_override=";".join(addrs), environ={})
        brokers.add((config.broker_name, config.broker_id))
        metrics_port = args["--metrics-port"][0]
        assert metrics_port in service["healthcheck"]["test"][2]
    assert brokers == {("broker-a", 0), ("broker-a", 1), ("broker-b", 0)}
    assert len({*(f"{b}:{i}" for b, i in brokers)}) == len(agents)
    # Prometheus scrapes exactly these services on their metrics ports
    scrape_configs = load_yaml(PROMETHEUS / "prometheus.yml")["scrape_configs"]
    jobs = {job["job_name"]: sorted(job["static_configs"][0]["targets"]) for job in scrape_configs}

    def targets_of(names: set[str]) -> list[str]:
        return sorted(f"{n}:{flags(services[n]['command'])['--metrics-port'][0]}" for n in names)

    assert jobs == {"namesrv": targets_of(namesrvs), "broker-agent": targets_of(agents)}
    prometheus = services["prometheus"]
    assert "./prometheus:/etc/prometheus:ro" in prometheus["volumes"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    logical = re.sub(r"\\\n", " ", text)
    instructions = []
    for line in logical.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
    return instructions


def test_dockerfile_slim_non_root_healthcheck_both_programs() -> None:
    instructions = dockerfile_instructions()
    args = dict(rest.split("=", 1) for keyword, rest in instructions if keyword == "ARG" and "=" in rest)
    assert args["BASE_IMAGE"] == "python:3.11-slim"
    assert args["PACKAGES"] == "index"
    stages = [rest for keyword, rest in instructions if keyword == "FROM"]
    assert stages[0] == "${BASE_IMAGE} AS runtime"
    names = {stage.split(" AS ")[1] for stage in stages if " AS " in stage}
    assert {f"install-{choice}" for choice in ("index", "wheelhouse")} <= names
    assert "install-${PACKAGES} AS installed" in stages
    final = max(i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM")
    last_stage = instructions[final:]
    assert last_stage[0][1] == "runtime", "the image is the runtime stage, without pip or build tools"
    users = [rest for keyword, rest in last_stage if keyword == "USER"]
    assert users
    assert users[-1].split(":")[0] not in {"root", "0"}
    (healthcheck,) = [rest for keyword, rest in last_stage if keyword == "HEALTHCHECK"]
    command = json.loads(healthcheck.split("CMD", 1)[1])
    assert command == ["grpc-health-check", "127.0.0.1:8081"]
    (cmd,) = [json.loads(rest) for keyword, rest in last_stage if keyword == "CMD"]
    assert cmd[0] == "namesrv"
    ports = {cmd[i]: cmd[i + 1] for i in range(len(cmd) - 1) if cmd[i].endswith("-port")}
    assert ports == {"--remoting-port": "9876", "--port": "8081", "--metrics-port": "9877"}
    exposed = [rest for keyword, rest in last_stage if keyword == "EXPOSE"]
    assert exposed == ["9876 8081 9877"]
    run = " ".join(rest for keyword, rest in instructions if keyword == "RUN")
    assert "namesrv --help" in run
    assert "broker-agent --help" in run
    assert "pip uninstall --yes --quiet pip setuptools" in run
    for keyword, rest in instructions:
        if keyword == "COPY" and "--from" not in rest:
            sources = [s for s in shlex.split(rest) if not s.startswith("--")][:-1]
            for source in sources:
                # build/wheelhouse is made by `make image` (scripts/build-image.sh)
                assert source.startswith("build/wheelhouse/") or (ROOT / source).exists(), source
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text(encoding="utf-8").split()
    for needed in ("!pyproject.toml", "!README.md", "!src/", "!build/wheelhouse/"):
        assert needed in ignore


def test_dockerfile_leaves_pyarrow_to_the_snapshots_extra() -> None:
    """EXTRAS (default empty) picks the optional dependencies: both install stages pass it to pip as
    the project's extras, and the build checks that the default image has no pyarrow and the
    snapshots one can write snapshots. make image builds both (scripts/build-image.sh)."""
    instructions = dockerfile_instructions()
    args = dict(rest.split("=", 1) for keyword, rest in instructions if keyword == "ARG" and "=" in rest)
    assert args["EXTRAS"] == ""
    run = [rest for keyword, rest in instructions if keyword == "RUN"]
    assert any('pip install "/src${EXTRAS:+[$EXTRAS]}"' in r for r in run)  # install-index
    assert any('"$wheel${EXTRAS:+[$EXTRAS]}"' in r for r in run)  # install-wheelhouse
    (check,) = [r for r in run if "pip uninstall" in r]
    assert "! /opt/namesrv-grpc/bin/python -c 'import pyarrow'" in check
    assert "/opt/namesrv-grpc/bin/python -c 'import namesrv_grpc.snapshot'" in check
    script = (ROOT / "scripts" / "build-image.sh").read_text(encoding="utf-8")
    assert "VARIANTS=${VARIANTS:-default snapshots}" in script
    assert "snapshots) tag=$IMAGE-snapshots extras=snapshots ;;" in script


def test_image_scripts_parse_and_find_the_apt_mirror(tmp_path: Path) -> None:
    """scripts/install-podman.sh and build-image.sh are valid bash; build-image.sh takes the
    debootstrap mirror from apt's sources in both formats (one-line and deb822)."""
    for script in ("install-podman.sh", "build-image.sh"):
        checked = subprocess.run(["bash", "-n", str(ROOT / "scripts" / script)], capture_output=True, timeout=30)
        assert checked.returncode == 0, checked.stderr
    apt = tmp_path / "apt"
    (apt / "sources.list.d").mkdir(parents=True)
    (apt / "sources.list").write_text(
        "# deb http://commented.example/debian bookworm main\n"
        "deb-src http://src.example/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://one.example/debian bookworm main\n",
        encoding="utf-8",
    )
    (apt / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://other.example/debian\nSuites: trixie\nComponents: main\n\n"
        "Types: deb deb-src\nURIs: http://sec.example/debian-security http://x.example\n"
        "Suites: bookworm-security\nComponents: main\n",
        encoding="utf-8",
    )

    def mirror(suite: str) -> str:
        result = subprocess.run(
            ["bash", str(ROOT / "scripts" / "build-image.sh"), "--apt-mirror", suite],
            capture_output=True,
            text=True,
            timeout=30,
            env={"PATH": "/usr/bin:/bin", "APT_ETC": str(apt)},
        )
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    assert mirror("bookworm") == "http://one.example/debian"
    assert mirror("bookworm-security") == "http://sec.example/debian-security"
    assert mirror("trixie") == "http://other.example/debian"
    assert mirror("bullseye") == ""


# --- the health-check scripts -------------------------------------------------------------------


def run_script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).parent / name), *args], capture_output=True, text=True, timeout=30)


def test_grpc_health_check_script(namesrv: NamesrvProcess) -> None:
    serving = run_script("grpc-health-check", namesrv.address)
    assert serving.returncode == 0, serving.stderr
    assert "SERVING" in serving.stdout
    service = run_script("grpc-health-check", namesrv.address, "namesrv.v1.NameServerService")
    assert service.returncode == 0, service.stderr
    down = run_script("grpc-health-check", f"127.0.0.1:{free_port()}")
    assert down.returncode == 1
    assert "UNAVAILABLE" in down.stderr


@pytest.fixture
def agent_metrics_url() -> Iterator[tuple[AgentMetrics, str]]:
    metrics = AgentMetrics()
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=metrics.registry)
    try:
        yield metrics, f"http://127.0.0.1:{port}/metrics"
    finally:
        server.shutdown()
        thread.join(5)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["http://127.0.0.1:9878/metrics", "many"], "MAX_FAILURES"),
        (["http://127.0.0.1:9878/metrics", "0"], "MAX_FAILURES"),
        (["file:///etc/passwd"], "METRICS_URL"),
    ],
)
def test_agent_health_check_refuses_bad_arguments_in_one_line(
    args: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        health_check.main(["agent-health-check", *args])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {named}:" in err
    assert "Traceback" not in err


def test_agent_health_check_script(agent_metrics_url: tuple[AgentMetrics, str]) -> None:
    metrics, url = agent_metrics_url
    fresh = run_script("agent-health-check", url)
    assert fresh.returncode == 1
    assert "not registered" in fresh.stderr
    metrics.observe_registration("10.0.0.1:9876", None, 0.01)
    for _ in range(3):
        metrics.observe_registration("10.0.0.2:9876", TimeoutError(), 1)
    one_down = run_script("agent-health-check", url)
    assert one_down.returncode == 0, one_down.stderr
    assert "10.0.0.2:9876" in one_down.stdout
    for _ in range(3):
        metrics.observe_registration("10.0.0.1:9876", TimeoutError(), 1)
    all_down = run_script("agent-health-check", url)
    assert all_down.returncode == 1
    assert "cannot register with any NameServer" in all_down.stderr
    gone = run_script("agent-health-check", f"http://127.0.0.1:{free_port()}/metrics")
    assert gone.returncode == 1


def test_install_script_is_idempotent() -> None:
    script = ROOT / "scripts" / "install-prometheus.sh"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True, timeout=30).returncode == 0
    require_binary("promtool")
    require_binary("prometheus")
    again = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert again.stdout == ""


def load_image_test() -> Any:
    """scripts/image_test.py as a module (scripts/ is no package)."""
    spec = importlib.util.spec_from_file_location("image_test", ROOT / "scripts" / "image_test.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_kube_play_pod_is_the_statefulset_pod_template() -> None:
    """What `make image-test` plays with podman kube play (podman 4.3 plays Pods, not StatefulSets)
    is the StatefulSet's pod: same container, args, probes and security contexts, the image under
    test, container ports published only on loopback, the claim template as a claim; a valid Pod."""
    image_test = load_image_test()
    scenario = image_test.KubeScenario(["podman"], "localhost/namesrv-grpc:dev", 10.0, 30.0)
    try:
        played = scenario.write_pod()
        pod = yaml.safe_load(scenario.manifest.read_text(encoding="utf-8"))
    finally:
        scenario.tmp.cleanup()
    template = find("StatefulSet", "namesrv")["spec"]["template"]
    (original,) = template["spec"]["containers"]
    assert pod["kind"] == "Pod"
    assert pod["spec"]["containers"] == [played]
    assert played["image"] == "localhost/namesrv-grpc:dev"
    for key in ("args", "startupProbe", "readinessProbe", "livenessProbe", "securityContext", "volumeMounts"):
        assert played[key] == original[key], key
    assert pod["spec"]["securityContext"] == template["spec"]["securityContext"]
    assert [(p["name"], p["containerPort"]) for p in played["ports"]] == [
        (p["name"], p["containerPort"]) for p in original["ports"]
    ]
    assert {p["hostIP"] for p in played["ports"]} == {"127.0.0.1"}
    assert len({p["hostPort"] for p in played["ports"]}) == len(played["ports"])
    assert scenario.ports == {p["name"]: p["hostPort"] for p in played["ports"]}
    (volume,) = pod["spec"]["volumes"]
    assert volume["persistentVolumeClaim"]["claimName"] == scenario.claim
    assert {m["name"] for m in played["volumeMounts"]} == {volume["name"]}
    assert scenario.run_as_user == 10001
    assert scenario.grace_period == template["spec"]["terminationGracePeriodSeconds"]
    kv.validate(pod, KUBERNETES_VERSIONS[0], strict=True)


def test_install_podman_script_writes_containers_conf(tmp_path: Path) -> None:
    """With podman and its helpers installed (``make image-test`` runs before the test suite), the
    script installs nothing, prints nothing, and writes the containers.conf that makes podman work
    here: no default ulimits, cgroupfs, runc."""
    for binary in ("podman", "runc", "debootstrap", "catatonit"):
        if shutil.which(binary) is None:
            pytest.skip(f"{binary} is not installed (scripts/install-podman.sh, run by make image-test)")
    conf = tmp_path / "nested" / "containers.conf"
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "install-podman.sh"), str(conf)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    lines = [line for line in conf.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    assert lines == [
        "[containers]",
        "default_ulimits = []",
        "[engine]",
        'cgroup_manager = "cgroupfs"',
        'runtime = "runc"',
    ]
