#!/usr/bin/env node
// A TypeScript client of the namesrv-grpc NameServer (Connect-ES over gRPC, package namesrv.v1):
//
//   namesrv-client route    --addr HOST:PORT --topic T              look up a route, pick a writable queue
//   namesrv-client watch    --addr HOST:PORT --topic T [--topic U]  print every route change, across restarts
//   namesrv-client register --addr HOST:PORT --broker-addr H:P --topic T[:read[:write[:perm]]] [--compress]
//                                                                   register a broker and keep its session
//
// Every command takes --tls, --tls-ca-file, --tls-cert-file, --tls-key-file, --tls-server-name,
// --access-key and --secret-key (see the README's "Security" section). Output is one line per event,
// key=value pairs. Exit status: 0 done, 1 error (printed by describeError), 2 bad usage ("COMMAND:
// what is wrong"; an empty --topic of route or watch counts as a missing one: "route: --topic is
// required"), 3 the topic has no route (NOT_FOUND / TOPIC_ROUTE_NOT_FOUND).
import { randomBytes } from "node:crypto";
import { parseArgs } from "node:util";
import { deflateSync } from "node:zlib";
import { create, toBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import CRC32C from "crc-32/crc32c.js";
import {
  NameServerService,
  OpenBrokerSessionRequestSchema,
  type OpenBrokerSessionResponse,
} from "./gen/namesrv/v1/name_server_service_pb.js";
import {
  RegisterBrokerBodySchema,
  TopicConfigSchema,
  type TopicConfig,
  type TopicRouteData,
} from "./gen/namesrv/v1/types_pb.js";
import {
  Backoff,
  connect,
  connectionOptions,
  describeError,
  errorInfo,
  millis,
  sleep,
  UsageError,
  type ConnectionFlags,
} from "./connection.js";

const USAGE = `usage: namesrv-client COMMAND [flags]

commands:
  route     look up a topic's route (PickupTopicRoute) and pick a writable queue
  watch     watch topics' routes (WatchTopicRoutes), reconnecting after a NameServer restart
  register  register a broker (RegisterBroker) and keep its session (OpenBrokerSession)
`;

/** RocketMQ's PermName.PERM_WRITE bit. */
const PERM_WRITE = 2;

type NameServer = Client<typeof NameServerService>;

async function route(args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { ...connectionOptions, topic: { type: "string" }, zone: { type: "string", default: "" } },
  });
  // Missing or empty: refused here, as in the Go and Java examples.
  if (!values.topic) throw new UsageError("--topic is required");
  const timeoutMs = millis("timeout-ms", values["timeout-ms"]);
  const client = createClient(NameServerService, connect(values as ConnectionFlags));
  let routeData: TopicRouteData | undefined;
  try {
    routeData = (await client.pickupTopicRoute({ topic: values.topic, zoneName: values.zone }, { timeoutMs })).route;
  } catch (thrown) {
    const error = ConnectError.from(thrown);
    // Decide by the reason, never by the message text.
    if (error.code === Code.NotFound && errorInfo(error)?.reason === "TOPIC_ROUTE_NOT_FOUND") {
      console.log(`not_found topic=${values.topic} reason=TOPIC_ROUTE_NOT_FOUND`);
      return 3;
    }
    console.error(describeError(error));
    return 1;
  }
  if (!routeData) throw new Error("PickupTopicRoute answered without a route");
  console.log(`route topic=${values.topic} ${routeSummary(routeData)}`);
  const queues = writableQueues(routeData);
  if (queues.length === 0) {
    console.log(`picked topic=${values.topic} none writable=0`);
    return 0;
  }
  // A producer picks queues round robin from a random start (RocketMQ TopicPublishInfo.sendWhichQueue).
  const queue = queues[Math.floor(Math.random() * queues.length)];
  console.log(
    `picked topic=${values.topic} broker=${queue.brokerName} queue=${queue.queueId} addr=${queue.addr} writable=${queues.length}`,
  );
  return 0;
}

interface MessageQueue {
  brokerName: string;
  queueId: number;
  addr: string;
}

/**
 * RocketMQ's MQClientInstance.topicRouteData2TopicPublishInfo: with an order config
 * ("broker-a:4;broker-b:4") its entries give the queues; otherwise every QueueData with the WRITE
 * permission whose broker name has a master (broker id 0) gives write_queue_nums queues.
 */
function writableQueues(routeData: TopicRouteData): MessageQueue[] {
  const masters = new Map<string, string>();
  for (const broker of routeData.brokerDatas) {
    const master = broker.brokerAddrs[0];
    if (master !== undefined) masters.set(broker.brokerName, master);
  }
  const queues: MessageQueue[] = [];
  if (routeData.orderTopicConf) {
    for (const item of routeData.orderTopicConf.split(";")) {
      const [name, nums] = item.split(":");
      const count = Number(nums);
      for (let id = 0; Number.isInteger(count) && id < count; id++) {
        queues.push({ brokerName: name, queueId: id, addr: masters.get(name) ?? "" });
      }
    }
    return queues;
  }
  const queueDatas = [...routeData.queueDatas].sort((a, b) => (a.brokerName < b.brokerName ? -1 : 1));
  for (const qd of queueDatas) {
    const addr = masters.get(qd.brokerName);
    if ((qd.perm & PERM_WRITE) === 0 || addr === undefined) continue;
    for (let id = 0; id < qd.writeQueueNums; id++) queues.push({ brokerName: qd.brokerName, queueId: id, addr });
  }
  return queues;
}

/** A route as one canonical text: queues=<broker:rR:wW:pP:fF,...> brokers=<broker@cluster/id=addr/...> [order=...]. */
function routeSummary(routeData: TopicRouteData): string {
  const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  const queues = routeData.queueDatas
    .map((q) => `${q.brokerName}:r${q.readQueueNums}:w${q.writeQueueNums}:p${q.perm}:f${q.topicSysFlag}`)
    .sort(byText);
  const brokers = routeData.brokerDatas
    .map((b) => {
      const ids = Object.keys(b.brokerAddrs)
        .map(Number)
        .sort((x, y) => x - y);
      return `${b.brokerName}@${b.cluster}` + ids.map((id) => `/${id}=${b.brokerAddrs[id]}`).join("");
    })
    .sort(byText);
  const order = routeData.orderTopicConf ? ` order=${routeData.orderTopicConf}` : "";
  return `queues=${queues.join(",")} brokers=${brokers.join(",")}${order}`;
}

/** An AbortSignal that fires on SIGINT or SIGTERM. */
function stopSignal(): AbortSignal {
  const controller = new AbortController();
  for (const name of ["SIGINT", "SIGTERM"] as const) process.once(name, () => controller.abort());
  return controller.signal;
}

async function watch(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      ...connectionOptions,
      topic: { type: "string", multiple: true },
      zone: { type: "string", default: "" },
      "max-backoff-ms": { type: "string", default: "5000" },
    },
  });
  const topics = values.topic ?? [];
  // As route: an empty --topic is a missing one.
  if (topics.length === 0 || topics.includes("")) throw new UsageError("--topic is required");
  const client = createClient(NameServerService, connect(values as ConnectionFlags));
  const stop = stopSignal();
  const backoff = new Backoff(100, millis("max-backoff-ms", values["max-backoff-ms"]));
  while (!stop.aborted) {
    try {
      let first = true;
      for await (const message of client.watchTopicRoutes({ topics, zoneName: values.zone }, { signal: stop })) {
        // The first message of a stream is the whole state of the watched topics: after a reconnect
        // (the NameServer may have restarted; revisions do not survive a restart) it replaces
        // whatever was known before.
        console.log(`${first ? "snapshot" : "update"} revision=${message.revision} topics=${message.changes.length}`);
        if (first) backoff.reset();
        first = false;
        for (const change of message.changes) {
          const state = change.removed || !change.route ? "removed=true" : routeSummary(change.route);
          console.log(`change topic=${change.topic} ${state}`);
        }
      }
      throw new ConnectError("the NameServer ended the watch", Code.Unavailable);
    } catch (thrown) {
      if (stop.aborted) break;
      const delay = backoff.next();
      console.log(`disconnected ${describeError(thrown)} retry_in_ms=${delay}`);
      await sleep(delay, stop);
    }
  }
  return 0;
}

/** A broker as the register command registers it. */
interface Broker {
  clusterName: string;
  brokerName: string;
  brokerId: number;
  brokerAddr: string;
  haServerAddr: string;
  zoneName: string;
  instanceId: string;
  topics: Record<string, TopicConfig>;
  compressed: boolean;
  heartbeatTimeoutMillis: bigint;
  timestamp: bigint;
}

/** NAME[:READ[:WRITE[:PERM]]], queues 4:4 and perm 6 by default. */
function parseTopic(spec: string): TopicConfig {
  const parts = spec.split(":");
  if (!parts[0] || parts.length > 4) throw new UsageError(`--topic ${JSON.stringify(spec)}: expected NAME[:READ[:WRITE[:PERM]]]`);
  const numbers = [4, 4, 6];
  const limits = [65535, 65535, 15];
  parts.slice(1).forEach((text, i) => {
    const n = Number(text);
    if (!/^\d+$/.test(text) || n > limits[i]) {
      throw new UsageError(`--topic ${JSON.stringify(spec)}: ${JSON.stringify(text)} is not a number 0..${limits[i]}`);
    }
    numbers[i] = n;
  });
  return create(TopicConfigSchema, {
    topicName: parts[0],
    readQueueNums: numbers[0],
    writeQueueNums: numbers[1],
    perm: numbers[2],
  });
}

/**
 * Serializes the RegisterBrokerBody, zlib-compresses it when asked, and registers with body_crc32c =
 * CRC32C (Castagnoli) of the bytes exactly as sent.
 */
async function registerOnce(client: NameServer, broker: Broker, timeoutMs: number): Promise<void> {
  const serialized = toBinary(
    RegisterBrokerBodySchema,
    create(RegisterBrokerBodySchema, {
      topicConfigTable: broker.topics,
      // Topic config version: the NameServer redoes the topic work only when it changes (S06).
      dataVersion: { timestamp: broker.timestamp, counter: 1n },
    }),
  );
  const body = broker.compressed ? deflateSync(serialized) : serialized;
  const bodyCrc32c = CRC32C.buf(body) >>> 0;
  const response = await client.registerBroker(
    {
      clusterName: broker.clusterName,
      brokerName: broker.brokerName,
      brokerId: broker.brokerId,
      brokerAddr: broker.brokerAddr,
      haServerAddr: broker.haServerAddr,
      body,
      bodyCrc32c,
      compressed: broker.compressed,
      heartbeatTimeoutMillis: broker.heartbeatTimeoutMillis,
      instanceId: broker.instanceId,
      zoneName: broker.zoneName,
    },
    { timeoutMs },
  );
  console.log(
    `registered broker=${broker.brokerName} id=${broker.brokerId} addr=${broker.brokerAddr} ` +
      `topics=${Object.keys(broker.topics).length} compressed=${broker.compressed} body_bytes=${body.length} ` +
      `crc32c=${bodyCrc32c.toString(16).padStart(8, "0")} master_addr=${response.masterAddr}`,
  );
  if (response.conflictingInstanceId) console.log(`conflict other_instance=${response.conflictingInstanceId}`);
}

type SessionRequest = MessageInitShape<typeof OpenBrokerSessionRequestSchema>;

/** The requests of a session stream: pushed by the program, read by the transport. */
class Outbox implements AsyncIterable<SessionRequest> {
  private readonly items: SessionRequest[] = [];
  private wake: (() => void) | undefined;
  private closed = false;

  push(item: SessionRequest): void {
    this.items.push(item);
    this.wake?.();
  }

  close(): void {
    this.closed = true;
    this.wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<SessionRequest> {
    for (;;) {
      const item = this.items.shift();
      if (item !== undefined) {
        yield item;
      } else if (this.closed) {
        return;
      } else {
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = undefined;
      }
    }
  }
}

/**
 * Registers, opens the session, says hello and sends heartbeats until the stream fails or `stop`
 * fires. The broker stays registered exactly as long as the session lives: when this process dies,
 * the NameServer removes the broker at once (S15).
 */
async function keepSession(
  client: NameServer,
  broker: Broker,
  timeoutMs: number,
  intervalMs: number,
  backoff: Backoff,
  stop: AbortSignal,
): Promise<void> {
  await registerOnce(client, broker, timeoutMs);
  const hello: SessionRequest = {
    kind: {
      case: "hello",
      value: {
        clusterName: broker.clusterName,
        brokerName: broker.brokerName,
        brokerId: broker.brokerId,
        brokerAddr: broker.brokerAddr,
        instanceId: broker.instanceId,
      },
    },
  };
  const outbox = new Outbox();
  outbox.push(hello);
  const beat = () => outbox.push({ kind: { case: "heartbeat", value: {} } });
  let timer = setInterval(beat, intervalMs);
  try {
    const responses: AsyncIterable<OpenBrokerSessionResponse> = client.openBrokerSession(outbox, { signal: stop });
    for await (const response of responses) {
      switch (response.kind.case) {
        case "accepted": {
          const timeout = Number(response.kind.value.heartbeatTimeoutMillis);
          const every = Math.min(intervalMs, Math.floor(timeout / 3));
          clearInterval(timer);
          timer = setInterval(beat, every);
          backoff.reset();
          console.log(`session accepted heartbeat_timeout_ms=${timeout} heartbeat_every_ms=${every}`);
          break;
        }
        case "registerRequired":
          console.log(`register_required reason=${JSON.stringify(response.kind.value.reason)}`);
          await registerOnce(client, broker, timeoutMs);
          outbox.push(hello);
          break;
        case "masterChanged":
          console.log(
            `master_changed master_addr=${response.kind.value.masterAddr} ha_addr=${response.kind.value.haServerAddr}`,
          );
          break;
      }
    }
    throw new ConnectError("the NameServer ended the session", Code.Unavailable);
  } finally {
    clearInterval(timer);
    outbox.close();
  }
}

async function register(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      ...connectionOptions,
      cluster: { type: "string", default: "DefaultCluster" },
      "broker-name": { type: "string", default: "broker-a" },
      "broker-id": { type: "string", default: "0" },
      "broker-addr": { type: "string" },
      "ha-addr": { type: "string", default: "" },
      zone: { type: "string", default: "" },
      topic: { type: "string", multiple: true },
      compress: { type: "boolean", default: false },
      "heartbeat-timeout-ms": { type: "string", default: "0" },
      "heartbeat-interval-ms": { type: "string", default: "10000" },
    },
  });
  if (!values["broker-addr"]) throw new UsageError("--broker-addr is required");
  const brokerId = Number(values["broker-id"]);
  if (!Number.isInteger(brokerId) || brokerId < 0 || brokerId > 2147483647) {
    throw new UsageError("--broker-id must be 0..2147483647");
  }
  const topics: Record<string, TopicConfig> = {};
  for (const spec of values.topic ?? []) {
    const config = parseTopic(spec);
    topics[config.topicName] = config;
  }
  const broker: Broker = {
    clusterName: values.cluster,
    brokerName: values["broker-name"],
    brokerId,
    brokerAddr: values["broker-addr"],
    haServerAddr: values["ha-addr"],
    zoneName: values.zone,
    instanceId: randomBytes(16).toString("hex"),
    topics,
    compressed: values.compress,
    heartbeatTimeoutMillis: BigInt(millis("heartbeat-timeout-ms", values["heartbeat-timeout-ms"], 0)),
    timestamp: BigInt(Date.now()),
  };
  const timeoutMs = millis("timeout-ms", values["timeout-ms"]);
  const intervalMs = millis("heartbeat-interval-ms", values["heartbeat-interval-ms"]);
  const client = createClient(NameServerService, connect(values as ConnectionFlags));
  const stop = stopSignal();
  const backoff = new Backoff(100, 5000);
  while (!stop.aborted) {
    try {
      await keepSession(client, broker, timeoutMs, intervalMs, backoff, stop);
    } catch (thrown) {
      if (stop.aborted) break;
      const delay = backoff.next();
      console.log(`session_lost ${describeError(thrown)} retry_in_ms=${delay}`);
      await sleep(delay, stop);
    }
  }
  // Leaving on purpose: unregister (the session's end would remove the broker too).
  try {
    await client.unregisterBroker(
      {
        clusterName: broker.clusterName,
        brokerName: broker.brokerName,
        brokerId: broker.brokerId,
        brokerAddr: broker.brokerAddr,
        instanceId: broker.instanceId,
      },
      { timeoutMs },
    );
  } catch (thrown) {
    console.error(describeError(thrown));
    return 1;
  }
  console.log(`unregistered broker=${broker.brokerName} id=${broker.brokerId} addr=${broker.brokerAddr}`);
  return 0;
}

async function main(argv: string[]): Promise<number> {
  const [command, ...args] = argv;
  const commands: Record<string, (args: string[]) => Promise<number>> = { route, watch, register };
  if (command === "-h" || command === "--help" || command === "help") {
    process.stdout.write(USAGE);
    return 0;
  }
  const run = command === undefined ? undefined : commands[command];
  if (!run) {
    process.stderr.write(command === undefined ? USAGE : `namesrv-client: unknown command ${JSON.stringify(command)}\n${USAGE}`);
    return 2;
  }
  try {
    return await run(args);
  } catch (error) {
    if (error instanceof UsageError || (error as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")) {
      console.error(`${command}: ${(error as Error).message}`);
      return 2;
    }
    throw error;
  }
}

process.exit(await main(process.argv.slice(2)));
