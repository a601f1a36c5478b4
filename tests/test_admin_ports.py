"""``namesrv-admin`` given an address that is not a NameServer port of the protocol it speaks names the
mistake (issue 28), over real sockets on loopback:

- a RocketMQ **broker's** port (a small asyncio server built on the project's remoting codec that
  answers every request as a broker answers a NameServer's request code: REQUEST_CODE_NOT_SUPPORTED,
  " request type N not supported");
- an **HTTP** port (a tiny ``http.server`` in a thread, and our own metrics port);
- the **other protocol's** port: ``grpc://`` on our remoting port, ``remoting://`` on our gRPC port;
- **commas** between addresses, which used to be blamed on IPv6 brackets.

Every sub-command family is covered (reads, ``compare``, changes, the gRPC-only ``snapshot`` and
``watch``), with and without a protocol prefix.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any, cast

import pytest

from namesrv_grpc.admin.readers import NAMESRV_CODES, RemotingReader, identify_port
from namesrv_grpc.client.remoting import HTTP1, HTTP2, foreign_protocol
from namesrv_grpc.client.security import ClientSecurity
from namesrv_grpc.remoting.codec import FrameDecoder, FrameError, encode_command
from namesrv_grpc.remoting.codes import DEFAULT_FRAME_MAX_LENGTH, RequestCode, ResponseCode
from namesrv_grpc.remoting.errors import not_supported_remark
from tests.support import NamesrvProcess, _env, free_port, run_cli_in_process, running_namesrv

ADMIN = "namesrv_grpc.admin.cli"


def admin(*args: str) -> subprocess.CompletedProcess[str]:
    """namesrv-admin --timeout 2 ARGS, run in this process (tests/support.py ``run_cli_in_process``)."""
    return run_cli_in_process(ADMIN, "--timeout", "2", *args)


class FakeBroker:
    """A RocketMQ remoting server that answers every request as a broker answers a code it has no
    processor for (``AdminBrokerProcessor``'s default: REQUEST_CODE_NOT_SUPPORTED with the remark
    " request type N not supported"), and closes a connection that sends a broken frame, as Netty's
    decoder does. ``codes``: the request codes it was sent."""

    def __init__(self) -> None:
        self.codes: list[int] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.port = 0

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()
        self._loop.run_until_complete(server.wait_closed())

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder(DEFAULT_FRAME_MAX_LENGTH)
        with contextlib.suppress(OSError, FrameError):
            while data := await reader.read(65536):
                for request in decoder.feed(data):
                    self.codes.append(request.code)
                    answer = request.make_response(
                        ResponseCode.REQUEST_CODE_NOT_SUPPORTED, not_supported_remark(request.code)
                    )
                    writer.write(encode_command(answer))
                await writer.drain()
        writer.close()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> FakeBroker:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


class _Page(http.server.BaseHTTPRequestHandler):
    """Answers every GET and HEAD with a small page, as a metrics endpoint would; logs nothing."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        if self.command == "GET":
            self.wfile.write(b"up 1\n")

    do_HEAD = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NamesrvProcess]:
    with running_namesrv(tmp_path_factory.mktemp("ns"), "--metrics-port", str(free_port())) as server:
        yield server


@pytest.fixture(scope="module")
def metrics_address(namesrv: NamesrvProcess) -> str:
    args = namesrv.process.args
    assert isinstance(args, list)
    return f"127.0.0.1:{args[args.index('--metrics-port') + 1]}"


@pytest.fixture(scope="module")
def broker() -> Iterator[FakeBroker]:
    with FakeBroker() as server:
        yield server


@pytest.fixture(scope="module")
def web() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def broker_sentence(address: str, code: int) -> str:
    return (
        f"{address} looks like a RocketMQ broker port, not a NameServer (request code {code} not supported); "
        "NameServers listen on 9876"
    )


# ------------------------------------------------------------------------------------------ a broker


def test_a_broker_port_is_named_whatever_the_prefix(namesrv: NamesrvProcess, broker: FakeBroker) -> None:
    addr = broker.address
    # Detected: the probe (GET_NAMESRV_CONFIG, 319) is what the broker refuses.
    detected = admin("-n", addr, "topics")
    assert detected.returncode == 1
    assert detected.stderr.splitlines()[0] == f"namesrv-admin: {broker_sentence(addr, 319)}"
    assert "REQUEST_CODE_NOT_SUPPORTED" not in detected.stderr
    # remoting://: the first read is refused.
    named = admin("-n", f"remoting://{addr}", "route", "TopicTest")
    assert named.returncode == 1
    assert broker_sentence(addr, RequestCode.GET_ROUTEINFO_BY_TOPIC) in named.stderr
    # grpc://: the gRPC call fails, and the port is asked what it is.
    over_grpc = admin("-n", f"grpc://{addr}", "topics")
    assert over_grpc.returncode == 1
    assert broker_sentence(addr, 319) in over_grpc.stderr
    # compare: the sentence the operator of issue 28 expected, once.
    compared = admin("-n", f"{namesrv.remoting_address};remoting://{addr}", "compare")
    assert compared.returncode == 2
    assert compared.stderr == f"namesrv-admin: compare: {broker_sentence(addr, 106)}\n"
    assert compared.stdout.splitlines()[-1].endswith('result="unreadable"} NaN')
    # A read falls over to the next NameServer after naming the broker port.
    fell_over = admin("-n", f"{addr};{namesrv.address}", "topics")
    assert fell_over.returncode == 0, fell_over.stderr
    assert broker_sentence(addr, 319) in fell_over.stderr
    assert json.loads(fell_over.stdout) == {"topics": []}


def test_changes_to_a_broker_port_are_named(broker: FakeBroker) -> None:
    addr = broker.address
    put = admin("-n", f"remoting://{addr}", "kv-put", "ns", "k", "v")
    assert put.returncode == 1
    assert put.stdout == f"remoting://{addr}: FAILED {broker_sentence(addr, RequestCode.PUT_KV_CONFIG)}\n"
    # ADD_WRITE_PERM_OF_BROKER is newer than some NameServers: GET_NAMESRV_CONFIG decides.
    assert RequestCode.ADD_WRITE_PERM_OF_BROKER not in NAMESRV_CODES
    del broker.codes[:]
    added = admin("-n", f"remoting://{addr}", "add-write-perm", "broker-a")
    assert added.returncode == 1
    assert broker_sentence(addr, RequestCode.GET_NAMESRV_CONFIG) in added.stdout
    assert broker.codes == [RequestCode.ADD_WRITE_PERM_OF_BROKER, RequestCode.GET_NAMESRV_CONFIG]
    snapshot = admin("-n", addr, "snapshot")
    assert snapshot.returncode == 1
    assert broker_sentence(addr, 319) in snapshot.stdout


def test_a_namesrv_that_lacks_a_newer_code_is_not_called_a_broker(namesrv: NamesrvProcess) -> None:
    """REQUEST_CODE_NOT_SUPPORTED to a code outside NAMESRV_CODES, from a NameServer: its own error."""

    unknown = cast(RequestCode, 1901)  # a code no NameServer knows

    async def ask() -> tuple[int, str]:
        reader = await RemotingReader.connect(namesrv.remoting_address, ClientSecurity(), 5)
        try:
            answer = await reader.request(unknown)
            return answer.code, str(answer.remark)
        finally:
            await reader.close()

    assert asyncio.run(ask()) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED, not_supported_remark(1901))


# ------------------------------------------------------------------------------------- an HTTP port


def http_sentence(address: str, status: str) -> str:
    return (
        f"{address} is an HTTP port (it answered {status!r}), not a NameServer: a metrics port? NameServers "
        "listen on 9876 (RocketMQ remoting) and 8081 (gRPC)"
    )


@pytest.mark.parametrize("prefix", ["", "remoting://", "grpc://"])
def test_an_http_port_is_named(web: str, prefix: str) -> None:
    read = admin("-n", f"{prefix}{web}", "topics")
    assert read.returncode == 1
    assert read.stderr.splitlines()[0] == f"namesrv-admin: {http_sentence(web, 'HTTP/1.0 200 OK')}"
    change = admin("-n", f"{prefix}{web}", "kv-put", "ns", "k", "v")
    assert change.returncode == 1
    assert http_sentence(web, "HTTP/1.0 200 OK") in change.stdout


def test_our_metrics_port_is_named(namesrv: NamesrvProcess, metrics_address: str) -> None:
    compared = admin("-n", f"{namesrv.remoting_address};{metrics_address}", "compare")
    assert compared.returncode == 2
    assert compared.stderr.startswith(
        f"namesrv-admin: compare: {metrics_address} is an HTTP port (it answered 'HTTP/1."
    )
    watched = admin("-n", metrics_address, "watch", "TopicTest")
    assert watched.returncode == 1
    assert f"namesrv-admin: watch: {metrics_address} is an HTTP port" in watched.stderr


# ------------------------------------------------------------------------ the other protocol's port


def test_grpc_prefix_on_a_remoting_port(namesrv: NamesrvProcess) -> None:
    addr = namesrv.remoting_address
    sentence = f"{addr} speaks RocketMQ remoting, not gRPC: use remoting://{addr} or the gRPC port (default 8081)"
    read = admin("-n", f"grpc://{addr}", "topics")
    assert read.returncode == 1
    assert read.stderr.splitlines()[0] == f"namesrv-admin: {sentence}"
    assert "Socket closed" not in read.stderr
    compared = admin("-n", f"{namesrv.address};grpc://{addr}", "compare")
    assert compared.returncode == 2
    assert compared.stderr == f"namesrv-admin: compare: {sentence}\n"
    put = admin("-n", f"grpc://{addr}", "kv-put", "ns", "k", "v")
    assert put.stdout == f"{addr}: FAILED {sentence}\n"
    # The gRPC-only commands say that they need gRPC, with or without the prefix.
    for name in (f"grpc://{addr}", addr):
        snapshot = admin("-n", name, "snapshot")
        assert snapshot.returncode == 1
        assert f"{addr} is a RocketMQ remoting port: snapshot needs namesrv-grpc's gRPC API" in snapshot.stdout
    watched = admin("-n", addr, "watch", "TopicTest")
    assert watched.returncode == 1
    assert watched.stderr == (
        f"namesrv-admin: watch: {addr} is a RocketMQ remoting port: watch needs namesrv-grpc's gRPC API (give "
        "its gRPC port, default 8081)\n"
    )


def test_remoting_prefix_on_a_grpc_port(namesrv: NamesrvProcess) -> None:
    addr = namesrv.address
    sentence = (
        f"{addr} speaks gRPC (HTTP/2), not RocketMQ remoting: use grpc://{addr} or the remoting port (default 9876)"
    )
    read = admin("-n", f"remoting://{addr}", "topics")
    assert read.returncode == 1
    assert read.stderr.splitlines()[0] == f"namesrv-admin: {sentence}"
    assert "connection closed by the server" not in read.stderr
    compared = admin("-n", f"{namesrv.remoting_address};remoting://{addr}", "compare")
    assert compared.returncode == 2
    assert compared.stderr == f"namesrv-admin: compare: {sentence}\n"
    put = admin("-n", f"remoting://{addr}", "kv-delete", "ns", "k")
    assert put.stdout == f"remoting://{addr}: FAILED {sentence}\n"
    # Without a prefix the same port is detected as gRPC and read.
    assert admin("-n", addr, "topics").returncode == 0


def test_a_watch_skips_a_wrong_port_and_watches_the_others(namesrv: NamesrvProcess) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", ADMIN, "-n", f"{namesrv.remoting_address};{namesrv.address}", "watch", "T0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert process.stdout is not None
        assert process.stderr is not None
        line = json.loads(process.stdout.readline())
        assert (line["namesrv"], line["topic"], line["removed"]) == (namesrv.address, "T0", True)
        process.send_signal(signal.SIGINT)
        assert process.wait(10) == 0
        assert f"namesrv-admin: watch: {namesrv.remoting_address} is a RocketMQ remoting port" in process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()


# ----------------------------------------------------------------------------------------------- commas


@pytest.mark.parametrize("command", [("topics",), ("compare",), ("kv-put", "ns", "k", "v"), ("watch", "T")])
def test_commas_between_addresses_are_named(command: tuple[str, ...]) -> None:
    result = admin("-n", "10.0.0.1:9876,10.0.0.2:9876", *command)
    assert result.returncode == 2
    assert (
        "separate NameServer addresses with ';', not ',' (as RocketMQ's namesrvAddr): '10.0.0.1:9876;10.0.0.2:9876'"
    ) in result.stderr
    assert "IPv6" not in result.stderr
    mixed = admin("-n", "10.0.0.1:9876;grpc://10.0.0.2:8081,10.0.0.3:8081", *command)
    assert mixed.returncode == 2
    assert "separate NameServer addresses with ';', not ','" in mixed.stderr


# ------------------------------------------------------------------------------------------ pure parts


def test_foreign_protocol_reads_the_first_bytes() -> None:
    settings = bytes.fromhex("00001e040000000000") + bytes(30)  # gRPC's server preface: SETTINGS, 5 settings
    assert foreign_protocol(settings) == HTTP2
    assert foreign_protocol(b"HTTP/1.1 400 Bad Request\r\n") == HTTP1
    assert foreign_protocol(bytes.fromhex("00001e040000000001")) is None  # stream 1: not a preface
    assert foreign_protocol(bytes.fromhex("00001f040000000000")) is None  # 31 bytes: not 6-byte settings
    assert foreign_protocol(bytes.fromhex("0000006a00000066")) is None  # a remoting frame's start
    assert foreign_protocol(b"") is None


def test_identify_port_cannot_tell_where_nothing_listens() -> None:
    assert asyncio.run(identify_port(f"127.0.0.1:{free_port()}", ClientSecurity(), 2)) is None


def test_identify_port_gives_up_on_a_silent_port_after_one_probe() -> None:
    """A port that accepts and never answers (nor closes) is neither HTTP nor remoting: the remoting
    probe is not tried after the HTTP one found nothing."""

    async def probe() -> tuple[tuple[str, str] | None, int]:
        connections: list[bytes] = []

        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            connections.append(await reader.read(100))
            await reader.read()  # until the client closes
            writer.close()

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        async with server:
            port = server.sockets[0].getsockname()[1]
            found = await identify_port(f"127.0.0.1:{port}", ClientSecurity(), 0.5)
        return found, len(connections)

    assert asyncio.run(probe()) == (None, 1)


def test_identify_port(namesrv: NamesrvProcess, broker: FakeBroker, web: str) -> None:
    security = ClientSecurity()
    assert asyncio.run(identify_port(namesrv.address, security, 2)) == ("grpc", "")
    assert asyncio.run(identify_port(namesrv.remoting_address, security, 2)) == ("remoting", "")
    assert asyncio.run(identify_port(broker.address, security, 2)) == ("broker", "319")
    assert asyncio.run(identify_port(web, security, 2)) == ("http", "HTTP/1.0 200 OK")


def test_metrics_address_fixture_is_the_metrics_port(metrics_address: str) -> None:
    import urllib.request

    with urllib.request.urlopen(f"http://{metrics_address}/metrics", timeout=10) as page:
        assert b"namesrv_" in page.read()
