package org.apache.rocketmq.namesrv.example;

import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Collectors;
import java.util.zip.CRC32C;
import java.util.zip.Deflater;
import org.apache.rocketmq.namesrv.v1.BrokerData;
import org.apache.rocketmq.namesrv.v1.DataVersion;
import org.apache.rocketmq.namesrv.v1.NameServerServiceGrpc;
import org.apache.rocketmq.namesrv.v1.OpenBrokerSessionRequest;
import org.apache.rocketmq.namesrv.v1.OpenBrokerSessionResponse;
import org.apache.rocketmq.namesrv.v1.PickupTopicRouteRequest;
import org.apache.rocketmq.namesrv.v1.QueueData;
import org.apache.rocketmq.namesrv.v1.RegisterBrokerBody;
import org.apache.rocketmq.namesrv.v1.RegisterBrokerRequest;
import org.apache.rocketmq.namesrv.v1.RegisterBrokerResponse;
import org.apache.rocketmq.namesrv.v1.SessionHeartbeat;
import org.apache.rocketmq.namesrv.v1.SessionHello;
import org.apache.rocketmq.namesrv.v1.TopicConfig;
import org.apache.rocketmq.namesrv.v1.TopicRouteChange;
import org.apache.rocketmq.namesrv.v1.TopicRouteData;
import org.apache.rocketmq.namesrv.v1.UnregisterBrokerRequest;
import org.apache.rocketmq.namesrv.v1.WatchTopicRoutesRequest;
import org.apache.rocketmq.namesrv.v1.WatchTopicRoutesResponse;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * A Java client of the namesrv-grpc NameServer (grpc-java, package namesrv.v1). Commands: {@code
 * route} (look up a route, pick a writable queue), {@code watch} (print every route change, across
 * NameServer restarts), {@code register} (register a broker and keep its session). Every command
 * takes the TLS and signing flags of {@link Connection}. Output is one line per event, key=value
 * pairs. Exit status: 0 done, 1 error (printed by {@link Connection#describe}), 2 bad usage (printed
 * as "COMMAND: what is wrong", like the Go and TypeScript examples; an empty --topic of route or
 * watch counts as a missing one: "route: --topic is required"), 3 the topic has no route (NOT_FOUND /
 * TOPIC_ROUTE_NOT_FOUND).
 */
@Command(
    name = "namesrv-client",
    mixinStandardHelpOptions = true,
    subcommands = {NamesrvClient.Route.class, NamesrvClient.Watch.class, NamesrvClient.Register.class},
    description = "A client of the namesrv-grpc NameServer.")
public final class NamesrvClient {
  /** RocketMQ's PermName.PERM_WRITE bit. */
  static final int PERM_WRITE = 2;

  public static void main(String[] args) {
    System.exit(new CommandLine(new NamesrvClient()).setParameterExceptionHandler(NamesrvClient::badUsage)
        .execute(args));
  }

  /** A bad flag: "COMMAND: what is wrong" on stderr (no usage text), exit status 2. */
  static int badUsage(ParameterException e, String[] args) {
    e.getCommandLine().getErr().println(e.getCommandLine().getCommandName() + ": " + e.getMessage());
    return 2;
  }

  /** The value of a --topic that must be given and not empty (route, watch), else bad usage. */
  static String requiredTopic(CommandSpec spec, String topic) {
    if (topic == null || topic.isEmpty()) {
      // Missing or empty: refused here, as in the Go and TypeScript examples.
      throw new ParameterException(spec.commandLine(), "--topic is required");
    }
    return topic;
  }

  @Command(name = "route", description = "Look up a topic's route (PickupTopicRoute) and pick a writable queue.")
  static final class Route implements java.util.concurrent.Callable<Integer> {
    @Mixin Connection connection;
    @Spec CommandSpec spec;

    @Option(names = "--topic", description = "topic to look up (required)")
    String topic;

    @Option(names = "--zone", defaultValue = "",
        description = "zone mode: only the brokers of this zone (and those without a master)")
    String zone;

    @Override
    public Integer call() throws Exception {
      requiredTopic(spec, topic);
      ManagedChannel channel = connection.open(spec.commandLine());
      try {
        TopicRouteData route;
        try {
          route = NameServerServiceGrpc.newBlockingStub(channel)
              .withDeadlineAfter(connection.timeoutMs, TimeUnit.MILLISECONDS)
              .pickupTopicRoute(PickupTopicRouteRequest.newBuilder().setTopic(topic).setZoneName(zone).build())
              .getRoute();
        } catch (StatusRuntimeException e) {
          // Decide by the reason, never by the message text.
          String reason = Connection.errorInfo(e).map(info -> info.getReason()).orElse("");
          if (e.getStatus().getCode() == Status.Code.NOT_FOUND && reason.equals("TOPIC_ROUTE_NOT_FOUND")) {
            System.out.println("not_found topic=" + topic + " reason=" + reason);
            return 3;
          }
          System.err.println(Connection.describe(e));
          return 1;
        }
        System.out.println("route topic=" + topic + " " + summary(route));
        List<String[]> queues = writableQueues(route);
        if (queues.isEmpty()) {
          System.out.println("picked topic=" + topic + " none writable=0");
          return 0;
        }
        // A producer picks queues round robin from a random start (TopicPublishInfo.sendWhichQueue).
        String[] queue = queues.get(ThreadLocalRandom.current().nextInt(queues.size()));
        System.out.println("picked topic=" + topic + " broker=" + queue[0] + " queue=" + queue[1] + " addr=" + queue[2]
            + " writable=" + queues.size());
        return 0;
      } finally {
        channel.shutdownNow();
      }
    }
  }

  /**
   * RocketMQ's MQClientInstance.topicRouteData2TopicPublishInfo: with an order config
   * ("broker-a:4;broker-b:4") its entries give the queues; otherwise every QueueData with the WRITE
   * permission whose broker name has a master (broker id 0) gives write_queue_nums queues. Each queue
   * is {broker name, queue id, master address}.
   */
  static List<String[]> writableQueues(TopicRouteData route) {
    Map<String, String> masters = new HashMap<>();
    for (BrokerData broker : route.getBrokerDatasList()) {
      String master = broker.getBrokerAddrsMap().get(0);
      if (master != null) {
        masters.put(broker.getBrokerName(), master);
      }
    }
    List<String[]> queues = new ArrayList<>();
    if (!route.getOrderTopicConf().isEmpty()) {
      for (String item : route.getOrderTopicConf().split(";")) {
        String[] parts = item.split(":");
        int count = parts.length == 2 && parts[1].matches("\\d+") ? Integer.parseInt(parts[1]) : 0;
        for (int id = 0; id < count; id++) {
          queues.add(new String[] {parts[0], Integer.toString(id), masters.getOrDefault(parts[0], "")});
        }
      }
      return queues;
    }
    List<QueueData> queueDatas = new ArrayList<>(route.getQueueDatasList());
    queueDatas.sort(Comparator.comparing(QueueData::getBrokerName));
    for (QueueData qd : queueDatas) {
      String addr = masters.get(qd.getBrokerName());
      if ((qd.getPerm() & PERM_WRITE) == 0 || addr == null) {
        continue;
      }
      for (int id = 0; id < qd.getWriteQueueNums(); id++) {
        queues.add(new String[] {qd.getBrokerName(), Integer.toString(id), addr});
      }
    }
    return queues;
  }

  /** A route as one canonical text: queues=&lt;broker:rR:wW:pP:fF,...&gt; brokers=&lt;broker@cluster/id=addr/...&gt; [order=...]. */
  static String summary(TopicRouteData route) {
    String queues = route.getQueueDatasList().stream()
        .map(q -> q.getBrokerName() + ":r" + q.getReadQueueNums() + ":w" + q.getWriteQueueNums() + ":p" + q.getPerm()
            + ":f" + q.getTopicSysFlag())
        .sorted()
        .collect(Collectors.joining(","));
    String brokers = route.getBrokerDatasList().stream()
        .map(b -> b.getBrokerName() + "@" + b.getCluster() + new TreeMap<>(b.getBrokerAddrsMap()).entrySet().stream()
            .map(e -> "/" + e.getKey() + "=" + e.getValue())
            .collect(Collectors.joining()))
        .sorted()
        .collect(Collectors.joining(","));
    String order = route.getOrderTopicConf().isEmpty() ? "" : " order=" + route.getOrderTopicConf();
    return "queues=" + queues + " brokers=" + brokers + order;
  }

  /** Sleeps, returning early when the JVM shuts down. */
  static void pause(long millis, CountDownLatch stop) throws InterruptedException {
    stop.await(millis, TimeUnit.MILLISECONDS);
  }

  @Command(name = "watch", description = "Watch topics' routes (WatchTopicRoutes), reconnecting after a NameServer restart.")
  static final class Watch implements java.util.concurrent.Callable<Integer> {
    @Mixin Connection connection;
    @Spec CommandSpec spec;

    @Option(names = "--topic", description = "topic to watch (repeat for more; at least one, none empty)")
    List<String> topics = new ArrayList<>();

    @Option(names = "--zone", defaultValue = "",
        description = "zone mode: only the brokers of this zone (and those without a master)")
    String zone;

    @Option(names = "--max-backoff-ms", defaultValue = "5000", description = "longest wait between reconnect attempts")
    long maxBackoffMs;

    @Override
    public Integer call() throws Exception {
      // As route: an empty --topic is a missing one.
      requiredTopic(spec, topics.isEmpty() || topics.contains("") ? "" : topics.get(0));
      ManagedChannel channel = connection.open(spec.commandLine());
      NameServerServiceGrpc.NameServerServiceBlockingStub stub = NameServerServiceGrpc.newBlockingStub(channel);
      Connection.Backoff backoff = new Connection.Backoff(100, maxBackoffMs);
      CountDownLatch stop = new CountDownLatch(1);
      Runtime.getRuntime().addShutdownHook(new Thread(() -> {
        stop.countDown();
        channel.shutdownNow();
      }));
      WatchTopicRoutesRequest request = WatchTopicRoutesRequest.newBuilder().addAllTopics(topics).setZoneName(zone).build();
      while (stop.getCount() > 0) {
        try {
          // WaitForReady: while the NameServer is down the call waits for the channel to connect again.
          Iterator<WatchTopicRoutesResponse> stream = stub.withWaitForReady().watchTopicRoutes(request);
          boolean first = true;
          while (stream.hasNext()) {
            WatchTopicRoutesResponse message = stream.next();
            // The first message of a stream is the whole state of the watched topics: after a
            // reconnect (the NameServer may have restarted; revisions do not survive a restart) it
            // replaces whatever was known before.
            System.out.println((first ? "snapshot" : "update") + " revision=" + message.getRevision() + " topics="
                + message.getChangesCount());
            if (first) {
              backoff.reset();
            }
            first = false;
            for (TopicRouteChange change : message.getChangesList()) {
              String state = change.getRemoved() ? "removed=true" : summary(change.getRoute());
              System.out.println("change topic=" + change.getTopic() + " " + state);
            }
          }
          throw Status.UNAVAILABLE.withDescription("the NameServer ended the watch").asRuntimeException();
        } catch (StatusRuntimeException e) {
          if (stop.getCount() == 0) {
            break;
          }
          long delay = backoff.next();
          System.out.println("disconnected " + Connection.describe(e) + " retry_in_ms=" + delay);
          pause(delay, stop);
          channel.resetConnectBackoff();
        }
      }
      return 0;
    }
  }

  @Command(name = "register", description = "Register a broker (RegisterBroker) and keep its session (OpenBrokerSession).")
  static final class Register implements java.util.concurrent.Callable<Integer> {
    @Mixin Connection connection;
    @Spec CommandSpec spec;

    @Option(names = "--cluster", defaultValue = "DefaultCluster", description = "cluster name (brokerClusterName)")
    String cluster;

    @Option(names = "--broker-name", defaultValue = "broker-a", description = "broker name (brokerName)")
    String brokerName;

    @Option(names = "--broker-id", defaultValue = "0", description = "broker id: 0 master, > 0 slave")
    int brokerId;

    @Option(names = "--broker-addr", description = "address clients send to, host:port (required)")
    String brokerAddr;

    @Option(names = "--ha-addr", defaultValue = "", description = "HA (replication) address host:port, if any")
    String haAddr;

    @Option(names = "--zone", defaultValue = "", description = "zone the broker runs in (RocketMQ 5.x ROCKETMQ_ZONE), if any")
    String zone;

    @Option(names = "--topic", description = "topic NAME[:READ[:WRITE[:PERM]]] (repeat; default queues 4:4, perm 6)")
    List<String> topics = new ArrayList<>();

    @Option(names = "--compress", description = "zlib-compress the registration body (compressedRegister)")
    boolean compress;

    @Option(names = "--heartbeat-timeout-ms", defaultValue = "0",
        description = "silence after which the NameServer removes the broker, milliseconds (0: its default, 120000)")
    long heartbeatTimeoutMs;

    @Option(names = "--heartbeat-interval-ms", defaultValue = "10000",
        description = "time between session heartbeats, milliseconds (kept under a third of the timeout)")
    long heartbeatIntervalMs;

    private final String instanceId = UUID.randomUUID().toString();
    // Topic config version: the NameServer redoes the topic work only when it changes (S06).
    private final DataVersion dataVersion =
        DataVersion.newBuilder().setTimestamp(System.currentTimeMillis()).setCounter(1).build();
    private RegisterBrokerBody body;

    @Override
    public Integer call() throws Exception {
      if (brokerAddr == null || brokerAddr.isEmpty()) {
        throw new ParameterException(spec.commandLine(), "--broker-addr is required");
      }
      if (brokerId < 0) {
        throw new ParameterException(spec.commandLine(), "--broker-id must be 0..2147483647");
      }
      if (heartbeatIntervalMs <= 0 || heartbeatTimeoutMs < 0) {
        throw new ParameterException(spec.commandLine(),
            "--heartbeat-interval-ms must be > 0 and --heartbeat-timeout-ms >= 0");
      }
      RegisterBrokerBody.Builder bodyBuilder = RegisterBrokerBody.newBuilder().setDataVersion(dataVersion);
      for (String spec : topics) {
        TopicConfig config = parseTopic(spec);
        bodyBuilder.putTopicConfigTable(config.getTopicName(), config);
      }
      body = bodyBuilder.build();
      ManagedChannel channel = connection.open(spec.commandLine());
      NameServerServiceGrpc.NameServerServiceBlockingStub blocking = NameServerServiceGrpc.newBlockingStub(channel);
      NameServerServiceGrpc.NameServerServiceStub async = NameServerServiceGrpc.newStub(channel);
      CountDownLatch stop = new CountDownLatch(1);
      CountDownLatch stopped = new CountDownLatch(1);
      AtomicBoolean unregistered = new AtomicBoolean();
      // SIGTERM / SIGINT: leave on purpose (unregister), then exit 0.
      Runtime.getRuntime().addShutdownHook(new Thread(() -> {
        stop.countDown();
        try {
          stopped.await(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        Runtime.getRuntime().halt(unregistered.get() ? 0 : 1);
      }));
      Connection.Backoff backoff = new Connection.Backoff(100, 5000);
      try {
        while (stop.getCount() > 0) {
          try {
            keepSession(blocking, async, backoff, stop);
          } catch (StatusRuntimeException e) {
            if (stop.getCount() == 0) {
              break;
            }
            long delay = backoff.next();
            System.out.println("session_lost " + Connection.describe(e) + " retry_in_ms=" + delay);
            pause(delay, stop);
            channel.resetConnectBackoff();
          }
        }
        // The session's end would remove the broker too; unregistering says so explicitly.
        try {
          blocking.withDeadlineAfter(connection.timeoutMs, TimeUnit.MILLISECONDS).unregisterBroker(
              UnregisterBrokerRequest.newBuilder().setClusterName(cluster).setBrokerName(brokerName)
                  .setBrokerId(brokerId).setBrokerAddr(brokerAddr).setInstanceId(instanceId).build());
          System.out.println("unregistered broker=" + brokerName + " id=" + brokerId + " addr=" + brokerAddr);
          unregistered.set(true);
        } catch (StatusRuntimeException e) {
          System.err.println(Connection.describe(e));
        }
      } finally {
        channel.shutdownNow();
        stopped.countDown();
      }
      return unregistered.get() ? 0 : 1;
    }

    /** NAME[:READ[:WRITE[:PERM]]]. */
    private TopicConfig parseTopic(String text) {
      String[] parts = text.split(":", -1);
      if (parts[0].isEmpty() || parts.length > 4) {
        throw new ParameterException(spec.commandLine(),
            "--topic " + Connection.quote(text) + ": expected NAME[:READ[:WRITE[:PERM]]]");
      }
      int[] numbers = {4, 4, 6};
      int[] limits = {65535, 65535, 15};
      for (int i = 1; i < parts.length; i++) {
        if (!parts[i].matches("\\d{1,5}") || Integer.parseInt(parts[i]) > limits[i - 1]) {
          throw new ParameterException(spec.commandLine(),
              "--topic " + Connection.quote(text) + ": " + Connection.quote(parts[i]) + " is not a number 0.."
                  + limits[i - 1]);
        }
        numbers[i - 1] = Integer.parseInt(parts[i]);
      }
      return TopicConfig.newBuilder().setTopicName(parts[0]).setReadQueueNums(numbers[0])
          .setWriteQueueNums(numbers[1]).setPerm(numbers[2]).build();
    }

    /**
     * Serializes the RegisterBrokerBody, zlib-compresses it when asked, and registers with
     * body_crc32c = CRC32C (Castagnoli) of the bytes exactly as sent.
     */
    private void registerOnce(NameServerServiceGrpc.NameServerServiceBlockingStub stub) {
      byte[] bytes = body.toByteArray();
      if (compress) {
        Deflater deflater = new Deflater();
        deflater.setInput(bytes);
        deflater.finish();
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        byte[] buffer = new byte[8192];
        while (!deflater.finished()) {
          out.write(buffer, 0, deflater.deflate(buffer));
        }
        deflater.end();
        bytes = out.toByteArray();
      }
      CRC32C crc = new CRC32C();
      crc.update(bytes);
      int crc32c = (int) crc.getValue();
      RegisterBrokerResponse response = stub.withDeadlineAfter(connection.timeoutMs, TimeUnit.MILLISECONDS)
          .withWaitForReady()
          .registerBroker(RegisterBrokerRequest.newBuilder()
              .setClusterName(cluster).setBrokerName(brokerName).setBrokerId(brokerId).setBrokerAddr(brokerAddr)
              .setHaServerAddr(haAddr).setBody(com.google.protobuf.ByteString.copyFrom(bytes))
              .setBodyCrc32C(crc32c).setCompressed(compress).setHeartbeatTimeoutMillis(heartbeatTimeoutMs)
              .setInstanceId(instanceId).setZoneName(zone).build());
      System.out.println("registered broker=" + brokerName + " id=" + brokerId + " addr=" + brokerAddr + " topics="
          + body.getTopicConfigTableCount() + " compressed=" + compress + " body_bytes=" + bytes.length + " crc32c="
          + String.format("%08x", crc32c) + " master_addr=" + response.getMasterAddr());
      if (!response.getConflictingInstanceId().isEmpty()) {
        System.out.println("conflict other_instance=" + response.getConflictingInstanceId());
      }
    }

    /**
     * Registers, opens the session, says hello and sends heartbeats until the stream fails or the
     * JVM shuts down. The broker stays registered exactly as long as the session lives: when this
     * process dies, the NameServer removes the broker at once (S15).
     */
    private void keepSession(NameServerServiceGrpc.NameServerServiceBlockingStub blocking,
        NameServerServiceGrpc.NameServerServiceStub async, Connection.Backoff backoff, CountDownLatch stop)
        throws InterruptedException {
      registerOnce(blocking);
      // Responses and the stream's end arrive on gRPC's threads; this thread alone sends.
      BlockingQueue<Object> events = new LinkedBlockingQueue<>();
      StreamObserver<OpenBrokerSessionRequest> requests = async.withWaitForReady()
          .openBrokerSession(new StreamObserver<>() {
            @Override
            public void onNext(OpenBrokerSessionResponse response) {
              events.add(response);
            }

            @Override
            public void onError(Throwable error) {
              events.add(error);
            }

            @Override
            public void onCompleted() {
              events.add(Status.UNAVAILABLE.withDescription("the NameServer ended the session").asRuntimeException());
            }
          });
      OpenBrokerSessionRequest hello = OpenBrokerSessionRequest.newBuilder().setHello(SessionHello.newBuilder()
          .setClusterName(cluster).setBrokerName(brokerName).setBrokerId(brokerId).setBrokerAddr(brokerAddr)
          .setInstanceId(instanceId)).build();
      OpenBrokerSessionRequest beat =
          OpenBrokerSessionRequest.newBuilder().setHeartbeat(SessionHeartbeat.getDefaultInstance()).build();
      requests.onNext(hello);
      long everyMs = heartbeatIntervalMs;
      long nextBeat = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(everyMs);
      try {
        while (stop.getCount() > 0) {
          Object event = events.poll(Math.min(100, Math.max(0, (nextBeat - System.nanoTime()) / 1_000_000)),
              TimeUnit.MILLISECONDS);
          if (System.nanoTime() >= nextBeat) {
            requests.onNext(beat);
            nextBeat = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(everyMs);
          }
          if (event == null) {
            continue;
          }
          if (event instanceof Throwable error) {
            throw Status.fromThrowable(error).asRuntimeException(Status.trailersFromThrowable(error));
          }
          OpenBrokerSessionResponse response = (OpenBrokerSessionResponse) event;
          switch (response.getKindCase()) {
            case ACCEPTED -> {
              long timeoutMs = response.getAccepted().getHeartbeatTimeoutMillis();
              everyMs = Math.min(heartbeatIntervalMs, timeoutMs / 3);
              nextBeat = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(everyMs);
              backoff.reset();
              System.out.println("session accepted heartbeat_timeout_ms=" + timeoutMs + " heartbeat_every_ms=" + everyMs);
            }
            case REGISTER_REQUIRED -> {
              System.out.println("register_required reason=\"" + response.getRegisterRequired().getReason() + "\"");
              registerOnce(blocking);
              requests.onNext(hello);
            }
            case MASTER_CHANGED -> System.out.println("master_changed master_addr="
                + response.getMasterChanged().getMasterAddr() + " ha_addr=" + response.getMasterChanged()
                .getHaServerAddr());
            default -> { }
          }
        }
      } finally {
        requests.onCompleted();
      }
    }
  }
}
