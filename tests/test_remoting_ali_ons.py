"""A real, independent RocketMQ remoting client against our NameServer: npm ``ali-ons`` (pure
JavaScript; installed into build/node by scripts/install-ali-ons.sh, which ``make test`` runs first).

A broker registers over remoting (as a Java broker does); ali-ons resolves the topic's route with
``MQClientAPI.getTopicRouteInfoFromNameServer`` (it sends ``version`` 121, so it gets fastjson's form
with unquoted integer keys) and gets TOPIC_NOT_EXIST (17) for an unknown topic.

Without node or ali-ons the test skips, unless ``NAMESRV_REQUIRE_NODE=1`` (set by ``make test``):
then it fails, so the client is really exercised.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zlib
from pathlib import Path

import pytest

from namesrv_grpc.core.model import DataVersion
from namesrv_grpc.remoting.codes import RequestCode, ResponseCode
from namesrv_grpc.wire import bodies
from tests.remoting_support import RemotingTestClient
from tests.support import ROOT, running_namesrv, topic

NODE_MODULES = ROOT / "build" / "node" / "node_modules"

SCRIPT = r"""
'use strict';
const MQClientAPI = require('ali-ons/lib/mq_client_api');
const silent = { info() {}, warn() {}, error() {}, debug() {} };

async function main() {
  const [address, ...topics] = process.argv.slice(2);
  const api = new MQClientAPI({ nameSrv: address, httpclient: {}, logger: silent });
  await api.ready();
  const results = {};
  for (const topic of topics) {
    try {
      results[topic] = { route: await api.getTopicRouteInfoFromNameServer(topic, 3000) };
    } catch (err) {
      results[topic] = { error: { code: err.code, name: err.name, message: err.message } };
    }
  }
  await api.close();
  process.stdout.write(JSON.stringify(results));
}

main().catch(err => { console.error(err && err.stack || err); process.exit(1); });
"""


def _node() -> str:
    node = shutil.which("node")
    installed = (NODE_MODULES / "ali-ons" / "package.json").exists()
    if node is None or not installed:
        what = "node is not installed" if node is None else f"ali-ons is not installed in {NODE_MODULES}"
        if os.environ.get("NAMESRV_REQUIRE_NODE") == "1":
            pytest.fail(f"{what}; run scripts/install-ali-ons.sh (NAMESRV_REQUIRE_NODE=1)")
        pytest.skip(f"{what}; run scripts/install-ali-ons.sh")
    return node


def test_ali_ons_resolves_a_route_registered_over_remoting_and_gets_17_for_unknown(tmp_path: Path) -> None:
    node = _node()
    script = tmp_path / "route.js"
    script.write_text(SCRIPT)
    with running_namesrv(tmp_path / "ns") as server, RemotingTestClient(server.remoting_address) as broker:
        body = bodies.encode_register_broker_body(
            {"TopicTest": topic("TopicTest", read=4, write=4), "SELF_TEST_TOPIC": topic("SELF_TEST_TOPIC", 1, 1)},
            DataVersion(0, 1, 1),
            compressed=True,
        )
        answer = broker.call(
            RequestCode.REGISTER_BROKER,
            {
                "clusterName": "DefaultCluster",
                "brokerName": "broker-a",
                "brokerId": "0",
                "brokerAddr": "127.0.0.1:10911",
                "haServerAddr": "127.0.0.1:10912",
                "compressed": "true",
                "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
            },
            body,
        )
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        result = subprocess.run(
            [node, str(script), server.remoting_address, "TopicTest", "NoSuchTopic"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "NODE_PATH": str(NODE_MODULES)},
        )
    assert result.returncode == 0, result.stderr
    results = json.loads(result.stdout)
    route = results["TopicTest"]["route"]
    assert route["queueDatas"] == [
        {"brokerName": "broker-a", "perm": 6, "readQueueNums": 4, "topicSysFlag": 0, "writeQueueNums": 4}
    ]
    assert route["brokerDatas"][0]["brokerName"] == "broker-a"
    assert route["brokerDatas"][0]["brokerAddrs"]["0"] == "127.0.0.1:10911"
    error = results["NoSuchTopic"]["error"]
    assert error["code"] == ResponseCode.TOPIC_NOT_EXIST
    assert error["message"].startswith("No topic route info in name server for the topic: NoSuchTopic")
