"""The broker's topics: its ``store/config/topics.json`` over the built-in system topics (S37, S38).

The file is what RocketMQ's ``TopicConfigManager`` persists (fastjson)::

    {"dataVersion": {"counter": 3, "timestamp": 1551626364371, "stateVersion": 0},
     "topicConfigTable": {"TopicTest": {"topicName": "TopicTest", "readQueueNums": 4,
                                        "writeQueueNums": 4, "perm": 6, "topicSysFlag": 0,
                                        "order": false, "topicFilterType": "SINGLE_TAG"}, ...}}

Accepted as real brokers wrote it: unknown fields anywhere (5.x ``attributes``, mapping tables),
missing fields (RocketMQ's defaults), numbers written as strings (fastjson reads them), a UTF-8
byte-order mark, tabs and CRLF. Rejected with :class:`TopicsFileError` naming the file, topic and
field: anything that is not that shape or out of range.

As the broker does, the system topics it creates in memory (``TopicConfigManager``'s constructor)
come first and the file's topics override them, so a broker with no topics.json yet registers just
the system topics (S38).

Static topics (RocketMQ 5.x, S44): beside topics.json the broker keeps ``topicQueueMapping.json``
(``TopicQueueMappingManager``)::

    {"dataVersion": {...}, "topicQueueMappingInfoMap": {"T": {"topic": "T", "scope": "__global__",
      "totalQueues": 8, "bname": "broker-a", "epoch": 1700000000000, "dirty": false,
      "hostedQueues": {"0": [{"bname": "broker-a", "queueId": 0, "gen": 0, ...}], ...}}}}

and registers, per topic, ``TopicQueueMappingDetail.cloneAsMappingInfo``: topic, totalQueues,
bname, epoch, dirty false, the default scope, and ``currIdMap`` built from ``hostedQueues``: each
logic queue whose last item is on this broker (``bname``), mapped to that item's ``queueId``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker_agent.config import BrokerConfig
from namesrv_grpc.core.model import (
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    DataVersion,
    TopicConfig,
    TopicQueueMappingInfo,
)
from namesrv_grpc.core.validation import MAX_PERM, MAX_QUEUE_NUMS, is_valid_topic, quote
from namesrv_grpc.wire import fastjson

log = logging.getLogger(__name__)

SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
DEFAULT_TOPIC = "TBW102"
BENCHMARK_TOPIC = "BenchmarkTest"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")
MAPPING_FILE_NAME = "topicQueueMapping.json"
"""The broker's static-topic mappings, beside topics.json (``BrokerPathConfigHelper.getTopicQueueMappingPath``)."""


class TopicsFileError(Exception):
    """topics.json cannot be used; the message names the file, the topic and the field."""


@dataclass(frozen=True, slots=True)
class BrokerTopics:
    """What the broker registers: topic name -> TopicConfig, its DataVersion, and (S44) topic name
    -> its static-topic mapping on this broker."""

    topic_config_table: dict[str, TopicConfig]
    data_version: DataVersion
    topic_queue_mappings: dict[str, TopicQueueMappingInfo] = dataclasses.field(default_factory=dict)


def system_topics(config: BrokerConfig) -> dict[str, TopicConfig]:
    """The topics a fresh broker creates (RocketMQ 4.9 ``TopicConfigManager``; S38)."""
    topics = [TopicConfig(SELF_TEST_TOPIC, read_queue_nums=1, write_queue_nums=1)]
    if config.auto_create_topic_enable:
        topics.append(
            TopicConfig(
                DEFAULT_TOPIC,
                read_queue_nums=config.default_topic_queue_nums,
                write_queue_nums=config.default_topic_queue_nums,
                perm=PERM_INHERIT | PERM_READ | PERM_WRITE,
            )
        )
    topics.append(TopicConfig(BENCHMARK_TOPIC, read_queue_nums=1024, write_queue_nums=1024))
    cluster_perm = PERM_INHERIT | (PERM_READ | PERM_WRITE if config.cluster_topic_enable else 0)
    topics.append(TopicConfig(config.broker_cluster_name, perm=cluster_perm))
    broker_perm = PERM_INHERIT | (PERM_READ | PERM_WRITE if config.broker_topic_enable else 0)
    topics.append(TopicConfig(config.broker_name, read_queue_nums=1, write_queue_nums=1, perm=broker_perm))
    topics.append(TopicConfig(OFFSET_MOVED_EVENT, read_queue_nums=1, write_queue_nums=1))
    return {topic.topic_name: topic for topic in topics}


def parse_topics_json(text: str, source: str) -> tuple[dict[str, TopicConfig], DataVersion]:
    """Parse topics.json text; return its topics and DataVersion (raises TopicsFileError)."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TopicsFileError(f"{source}: not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise TopicsFileError(f"{source}: expected a JSON object with topicConfigTable and dataVersion")
    table = document.get("topicConfigTable")
    if table is None:
        table = {}
    if not isinstance(table, dict):
        raise TopicsFileError(f"{source}: topicConfigTable: expected an object of topic name -> topic config")
    topics: dict[str, TopicConfig] = {}
    for key, raw in table.items():
        config = _topic_config(key, raw, f"{source}: topicConfigTable[{quote(key)}]")
        topics[config.topic_name] = config
    return topics, _data_version(document.get("dataVersion"), f"{source}: dataVersion")


def _topic_config(key: str, raw: Any, where: str) -> TopicConfig:
    if not isinstance(raw, dict):
        raise TopicsFileError(f"{where}: expected an object")
    name = raw.get("topicName")
    if name is None or name == "":
        name = key
    if not isinstance(name, str) or not is_valid_topic(name):
        shown = quote(name) if isinstance(name, str) else repr(name)[:80]
        raise TopicsFileError(
            f"{where}.topicName: {shown} is not a topic name (RocketMQ's rule: 1 to 127 of %|a-zA-Z0-9_-)"
        )
    default = TopicConfig(name)
    filter_type = raw.get("topicFilterType", default.topic_filter_type)
    if filter_type is None:
        filter_type = default.topic_filter_type
    if filter_type not in FILTER_TYPES:
        raise TopicsFileError(f"{where}.topicFilterType: {filter_type!r} is not SINGLE_TAG or MULTI_TAG")
    attributes = raw.get("attributes") or {}
    if not isinstance(attributes, dict):
        raise TopicsFileError(f"{where}.attributes: expected an object")
    return TopicConfig(
        topic_name=name,
        read_queue_nums=_int(raw, "readQueueNums", default.read_queue_nums, MAX_QUEUE_NUMS, where),
        write_queue_nums=_int(raw, "writeQueueNums", default.write_queue_nums, MAX_QUEUE_NUMS, where),
        perm=_int(raw, "perm", default.perm, MAX_PERM, where),
        topic_sys_flag=_int(raw, "topicSysFlag", 0, 2**31 - 1, where),
        order=_bool(raw, "order", where),
        topic_filter_type=filter_type,
        attributes={str(k): str(v) for k, v in attributes.items()},
    )


def _int(raw: dict[str, Any], field: str, default: int, high: int, where: str) -> int:
    value = raw.get(field)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TopicsFileError(f"{where}.{field}: {value!r} is not a whole number")
    if isinstance(value, str):
        if not value.strip().lstrip("-").isdigit():
            raise TopicsFileError(f"{where}.{field}: {value!r} is not a whole number")
        value = int(value)
    if not 0 <= value <= high:
        raise TopicsFileError(f"{where}.{field}: {value} is out of range 0..{high}")
    return value


def _bool(raw: dict[str, Any], field: str, where: str) -> bool:
    value = raw.get(field, False)
    if value is None:
        return False
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise TopicsFileError(f"{where}.{field}: {value!r} is not true or false")
    return value


def _data_version(raw: Any, where: str) -> DataVersion:
    if raw is None:
        return DataVersion()
    if not isinstance(raw, dict):
        raise TopicsFileError(f"{where}: expected an object with counter and timestamp")
    values = []
    for field in ("stateVersion", "timestamp", "counter"):
        value = raw.get(field, 0)
        if value is None:
            value = 0
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        if isinstance(value, dict) and "value" in value:  # DataVersion.counter is an AtomicLong in 4.x
            value = value["value"]
        if isinstance(value, bool) or not isinstance(value, int):
            raise TopicsFileError(f"{where}.{field}: {value!r} is not a whole number")
        values.append(value)
    return DataVersion(*values)


def read_topics_file(path: Path) -> tuple[dict[str, TopicConfig], DataVersion] | None:
    """Read topics.json at ``path``; None when it does not exist. Raises TopicsFileError when it
    exists but cannot be read or parsed."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise TopicsFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TopicsFileError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise TopicsFileError(f"{path}: file is empty")
    return parse_topics_json(text, str(path))


def parse_topic_queue_mapping_json(text: str, source: str) -> dict[str, TopicQueueMappingInfo]:
    """Parse topicQueueMapping.json text into what the broker registers (module docstring): topic ->
    ``cloneAsMappingInfo`` of its detail. Raises TopicsFileError naming the file, topic and field."""
    try:
        document = fastjson.loads(text.encode())  # fastjson writes hostedQueues' integer keys unquoted
    except fastjson.FastjsonDecodeError as exc:
        raise TopicsFileError(f"{source}: not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise TopicsFileError(f"{source}: expected a JSON object with topicQueueMappingInfoMap")
    table = document.get("topicQueueMappingInfoMap") or {}
    if not isinstance(table, dict):
        raise TopicsFileError(f"{source}: topicQueueMappingInfoMap: expected an object of topic -> mapping")
    mappings: dict[str, TopicQueueMappingInfo] = {}
    for key, raw in table.items():
        where = f"{source}: topicQueueMappingInfoMap[{quote(key)}]"
        if not isinstance(raw, dict):
            raise TopicsFileError(f"{where}: expected an object")
        name = raw.get("topic") or key
        bname = raw.get("bname")
        if not isinstance(name, str) or not is_valid_topic(name):
            raise TopicsFileError(f"{where}.topic: {name!r:.80} is not a topic name")
        if not isinstance(bname, str) or not bname:
            raise TopicsFileError(f"{where}.bname: expected the broker name, got {bname!r:.80}")
        epoch = raw.get("epoch", 0)
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise TopicsFileError(f"{where}.epoch: {epoch!r:.60} is not a time in ms")
        hosted = raw.get("hostedQueues") or {}
        if not isinstance(hosted, dict):
            raise TopicsFileError(f"{where}.hostedQueues: expected an object of logic queue id -> items")
        ids: dict[int, int] = {}
        for logic_id, items in hosted.items():
            if not str(logic_id).isdigit() or not isinstance(items, list):
                raise TopicsFileError(f"{where}.hostedQueues[{quote(str(logic_id))}]: expected a list of items")
            if not items:
                continue
            last = items[-1]
            if not isinstance(last, dict):
                raise TopicsFileError(f"{where}.hostedQueues[{logic_id}]: items must be objects")
            if last.get("bname") == bname:  # TopicQueueMappingDetail.buildIdMap, LEVEL_0
                ids[int(logic_id)] = _int(last, "queueId", 0, MAX_QUEUE_NUMS, f"{where}.hostedQueues[{logic_id}]")
        mappings[name] = TopicQueueMappingInfo(
            topic=name,
            bname=bname,
            total_queues=_int(raw, "totalQueues", 0, 2**31 - 1, where),
            epoch=epoch,
            curr_id_map=ids,
        )
    return mappings


def read_topic_queue_mapping_file(path: Path) -> dict[str, TopicQueueMappingInfo] | None:
    """Read topicQueueMapping.json at ``path``; None when it does not exist. Raises TopicsFileError
    when it exists but cannot be read or parsed (an empty file is no mappings, as RocketMQ's
    ``ConfigManager`` treats it)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise TopicsFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TopicsFileError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        return {}
    return parse_topic_queue_mapping_json(text, str(path))


def apply_broker_permission(topics: dict[str, TopicConfig], broker_permission: int) -> dict[str, TopicConfig]:
    """S35: when the broker is not both readable and writable, every topic carries its permission."""
    if broker_permission & PERM_READ and broker_permission & PERM_WRITE:
        return topics
    return {
        name: TopicConfig(
            t.topic_name,
            t.read_queue_nums,
            t.write_queue_nums,
            broker_permission,
            t.topic_sys_flag,
            t.order,
            t.topic_filter_type,
            t.attributes,
        )
        for name, t in topics.items()
    }


class TopicSource:
    """The broker's current topics, re-read from topics.json when the file changes.

    - At start (:meth:`load_initial`): the file, else its ``.bak`` (RocketMQ's ``ConfigManager``
      falls back to it), else, when neither exists, the system topics alone with DataVersion
      ``(0, start time ms, 0)`` as a fresh broker has (S38) -- unless the path was given
      explicitly (``must_exist``): then a missing file raises TopicsFileError. A file that exists
      but is broken (and no usable ``.bak``) raises TopicsFileError.
    - Later (:meth:`current`): a broken or vanished file keeps the last good topics (the broker
      rewrites topics.json by delete + rename, so it can be missing for a moment) and logs why.
    - A file whose topics changed while its DataVersion did not (edited by hand) gets a new
      DataVersion (same stateVersion, timestamp now, counter + 1), as the broker's own
      ``dataVersion.nextVersion()`` would, so NameServers do not skip the change (S06).
    """

    def __init__(
        self, config: BrokerConfig, path: Path, clock_millis: Callable[[], int], *, must_exist: bool = False
    ) -> None:
        """``must_exist``: the path was given explicitly (``--topics-json``), so a missing file (and
        ``.bak``) at start is an error instead of a fresh broker (S38)."""
        self.config = config
        self.path = path
        self.mapping_path = path.with_name(MAPPING_FILE_NAME)
        """The static-topic mappings beside the topics (S44); absent = none."""
        self.must_exist = must_exist
        self._mappings: dict[str, TopicQueueMappingInfo] = {}
        self._clock = clock_millis
        self._signature: tuple[int, ...] | None = None
        self._file_topics: dict[str, TopicConfig] | None = None
        self._file_version: DataVersion | None = None
        self.topics = BrokerTopics({}, DataVersion())
        self.last_error: str | None = None

    def load_initial(self) -> BrokerTopics:
        """Load at start; raises TopicsFileError for a broken file without a usable ``.bak``."""
        self._signature = self._stat()
        try:
            loaded = read_topics_file(self.path)
        except TopicsFileError as exc:
            loaded = self._read_bak()
            if loaded is None:
                raise
            log.warning("%s; using %s.bak", exc, self.path.name)
        if loaded is None:
            loaded = self._read_bak()
            if loaded is not None:
                log.warning("%s does not exist; using %s.bak", self.path, self.path.name)
        if loaded is None and self.must_exist:
            raise TopicsFileError(
                f"--topics-json {self.path}: no such file (only the default "
                "${storePathRootDir}/config/topics.json may be missing, on a fresh broker)"
            )
        if loaded is None:
            log.info("%s does not exist: registering the system topics of a fresh broker", self.path)
            loaded = ({}, DataVersion(0, self._clock(), 0))
        self._mappings = self._read_mappings()
        self._apply(*loaded)
        return self.topics

    def changed_on_disk(self) -> bool:
        """True when the file's (inode, size, mtime) differ from the last read."""
        return self._stat() != self._signature

    def current(self) -> BrokerTopics:
        """The topics to register now: re-reads the file when it changed on disk. Never raises."""
        signature = self._stat()
        if signature == self._signature:
            return self.topics
        try:
            loaded = read_topics_file(self.path)
            mappings = self._read_mappings()
        except TopicsFileError as exc:
            self._report(f"{exc}; keeping the {len(self.topics.topic_config_table)} topics read before")
            return self.topics
        if loaded is None:
            self._report(f"{self.path} disappeared; keeping the topics read before")
            return self.topics
        self._signature = signature
        self.last_error = None
        self._mappings = mappings
        self._apply(*loaded)
        return self.topics

    def _apply(self, file_topics: dict[str, TopicConfig], file_version: DataVersion) -> None:
        version = file_version
        if self._file_topics is not None and file_version == self._file_version:
            version = self.topics.data_version
            if file_topics != self._file_topics:
                version = DataVersion(version.state_version, self._clock(), version.counter + 1)
                log.warning("%s changed without a new dataVersion; registering it as %s", self.path, version)
        self._file_topics, self._file_version = file_topics, file_version
        topics = {**system_topics(self.config), **file_topics}
        self.topics = BrokerTopics(
            apply_broker_permission(topics, self.config.broker_permission), version, dict(self._mappings)
        )

    def _read_mappings(self) -> dict[str, TopicQueueMappingInfo]:
        """S44: the mapping file, else its ``.bak``, else none. Raises TopicsFileError when the file
        is broken and its ``.bak`` too (or missing)."""
        try:
            mappings = read_topic_queue_mapping_file(self.mapping_path)
        except TopicsFileError as exc:
            try:
                backup = read_topic_queue_mapping_file(self.mapping_path.with_name(MAPPING_FILE_NAME + ".bak"))
            except TopicsFileError:
                backup = None
            if backup is None:
                raise
            log.warning("%s; using %s.bak", exc, MAPPING_FILE_NAME)
            return backup
        return mappings or {}

    def _read_bak(self) -> tuple[dict[str, TopicConfig], DataVersion] | None:
        """The ``.bak`` copy RocketMQ keeps, or None when it is missing or unusable."""
        try:
            return read_topics_file(self.path.with_name(self.path.name + ".bak"))
        except TopicsFileError:
            return None

    def _report(self, message: str) -> None:
        if message != self.last_error:
            log.error("%s", message)
        self.last_error = message

    def _stat(self) -> tuple[int, ...] | None:
        """(inode, size, mtime) of topics.json, and of topicQueueMapping.json when it exists."""
        try:
            st = self.path.stat()
        except OSError:
            return None
        try:
            mapping = self.mapping_path.stat()
        except OSError:
            return (st.st_ino, st.st_size, st.st_mtime_ns)
        return (st.st_ino, st.st_size, st.st_mtime_ns, mapping.st_ino, mapping.st_size, mapping.st_mtime_ns)
