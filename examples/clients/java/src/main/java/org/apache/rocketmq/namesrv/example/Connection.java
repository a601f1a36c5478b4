package org.apache.rocketmq.namesrv.example;

import com.google.protobuf.Any;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.rpc.ErrorInfo;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ChannelCredentials;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.TlsChannelCredentials;
import io.grpc.protobuf.StatusProto;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.HexFormat;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.ThreadLocalRandom;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;

/**
 * The flags every command takes (where the NameServer is, TLS, RocketMQ 5 request signing: the
 * README's "Security" section, the same flags as namesrv-admin), the channel made from them, and how
 * the google.rpc.ErrorInfo of a failed call is read.
 */
final class Connection {
  @Option(names = "--addr", defaultValue = "127.0.0.1:8081", description = "NameServer gRPC address host:port")
  String addr;

  @Option(names = "--timeout-ms", defaultValue = "5000", description = "deadline of each unary call, milliseconds")
  long timeoutMs;

  @Option(names = "--tls", description = "use TLS, trusting the system's CA certificates")
  boolean tls;

  @Option(names = "--tls-ca-file", description = "CA certificates (PEM) to trust the server by; TLS on")
  File tlsCaFile;

  @Option(names = "--tls-cert-file", description = "client certificate (PEM) for mutual TLS")
  File tlsCertFile;

  @Option(names = "--tls-key-file", description = "private key (PEM, PKCS#8) of --tls-cert-file")
  File tlsKeyFile;

  @Option(names = "--tls-server-name", description = "name expected in the server's certificate")
  String tlsServerName;

  @Option(names = "--access-key", description = "sign calls with this access key (env NAMESRV_ACCESS_KEY)")
  String accessKey = System.getenv("NAMESRV_ACCESS_KEY");

  @Option(names = "--secret-key", description = "secret key of --access-key (env NAMESRV_SECRET_KEY)")
  String secretKey = System.getenv("NAMESRV_SECRET_KEY");

  /**
   * A channel with TLS and signing as configured. It reconnects by itself; {@link
   * ManagedChannel#resetConnectBackoff()} makes it try at once.
   */
  ManagedChannel open(picocli.CommandLine commandLine) throws IOException {
    if ((tlsCertFile == null) != (tlsKeyFile == null)) {
      throw new ParameterException(commandLine, "--tls-cert-file and --tls-key-file: give both or neither");
    }
    boolean signing = accessKey != null && !accessKey.isEmpty();
    if (signing != (secretKey != null && !secretKey.isEmpty())) {
      throw new ParameterException(commandLine, "--access-key and --secret-key: give both or neither");
    }
    if (signing && accessKey.matches(".*[\\s,/].*")) {
      throw new ParameterException(commandLine, "--access-key: must not contain white space, commas or slashes");
    }
    ChannelCredentials credentials;
    if (tls || tlsCaFile != null || tlsCertFile != null) {
      TlsChannelCredentials.Builder builder = TlsChannelCredentials.newBuilder();
      if (tlsCaFile != null) {
        builder.trustManager(tlsCaFile);
      }
      if (tlsCertFile != null) {
        builder.keyManager(tlsCertFile, tlsKeyFile);
      }
      credentials = builder.build();
    } else {
      credentials = InsecureChannelCredentials.create();
    }
    ManagedChannelBuilder<?> builder = Grpc.newChannelBuilder(addr, credentials);
    if (tlsServerName != null) {
      builder.overrideAuthority(tlsServerName);
    }
    if (signing) {
      builder.intercept(new Signer(accessKey, secretKey));
    }
    return builder.build();
  }

  /**
   * Signs every call as RocketMQ 5 clients do: x-mq-date-time (yyyyMMdd'T'HHmmss'Z', UTC) and
   * authorization "MQv2-HMAC-SHA1 Credential=&lt;ak&gt;, SignedHeaders=x-mq-date-time,
   * Signature=&lt;hex HMAC-SHA1(sk, x-mq-date-time)&gt;". Streams are signed when they open.
   */
  static final class Signer implements ClientInterceptor {
    private static final DateTimeFormatter DATE_TIME = DateTimeFormatter.ofPattern("yyyyMMdd'T'HHmmss'Z'");
    private static final Metadata.Key<String> DATE_TIME_KEY =
        Metadata.Key.of("x-mq-date-time", Metadata.ASCII_STRING_MARSHALLER);
    private static final Metadata.Key<String> AUTHORIZATION_KEY =
        Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);
    private final String accessKey;
    private final SecretKeySpec secret;

    Signer(String accessKey, String secretKey) {
      this.accessKey = accessKey;
      this.secret = new SecretKeySpec(secretKey.getBytes(StandardCharsets.UTF_8), "HmacSHA1");
    }

    @Override
    public <ReqT, RespT> ClientCall<ReqT, RespT> interceptCall(
        MethodDescriptor<ReqT, RespT> method, CallOptions options, Channel next) {
      return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
        @Override
        public void start(Listener<RespT> listener, Metadata headers) {
          String dateTime = ZonedDateTime.now(ZoneOffset.UTC).format(DATE_TIME);
          headers.put(DATE_TIME_KEY, dateTime);
          headers.put(AUTHORIZATION_KEY, "MQv2-HMAC-SHA1 Credential=" + accessKey
              + ", SignedHeaders=x-mq-date-time, Signature=" + sign(dateTime));
          super.start(listener, headers);
        }
      };
    }

    private String sign(String dateTime) {
      try {
        Mac mac = Mac.getInstance("HmacSHA1");
        mac.init(secret);
        return HexFormat.of().formatHex(mac.doFinal(dateTime.getBytes(StandardCharsets.US_ASCII)));
      } catch (GeneralSecurityException e) {
        throw new IllegalStateException("HmacSHA1 is part of every JDK", e);
      }
    }
  }

  /** The google.rpc.ErrorInfo in the google.rpc.Status details of a failed call, if any. */
  static Optional<ErrorInfo> errorInfo(Throwable error) {
    com.google.rpc.Status status = StatusProto.fromThrowable(error);
    if (status == null) {
      return Optional.empty();
    }
    for (Any detail : status.getDetailsList()) {
      if (detail.is(ErrorInfo.class)) {
        try {
          return Optional.of(detail.unpack(ErrorInfo.class));
        } catch (InvalidProtocolBufferException e) {
          return Optional.empty();
        }
      }
    }
    return Optional.empty();
  }

  /**
   * One line naming the status code, the reason and its metadata (sorted), then the server's message
   * (what is wrong, for a person) as a JSON string: error code=INVALID_ARGUMENT reason=INVALID_FIELD
   * domain=namesrv.rocketmq field=topic message="topic: ... is longer than 127 characters". Programs
   * decide by code and reason; the message is printed, never parsed.
   */
  static String describe(Throwable error) {
    Status status = Status.fromThrowable(error);
    String message = "message=" + quote(status.getDescription() == null ? "" : status.getDescription());
    return errorInfo(error)
        .map(info -> {
          StringBuilder line = new StringBuilder("error code=" + status.getCode() + " reason=" + info.getReason()
              + " domain=" + info.getDomain());
          new TreeMap<>(info.getMetadataMap()).forEach((key, value) -> line.append(' ').append(key).append('=')
              .append(value));
          return line.append(' ').append(message).toString();
        })
        .orElse("error code=" + status.getCode() + " reason= " + message);
  }

  /**
   * Text as a JSON string, as JavaScript's JSON.stringify writes it (quotes, backslashes and control
   * characters escaped, everything else as is), so the three examples print a message alike and on
   * one line.
   */
  static String quote(String text) {
    StringBuilder out = new StringBuilder("\"");
    for (char c : text.toCharArray()) {
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\n' -> out.append("\\n");
        case '\r' -> out.append("\\r");
        case '\t' -> out.append("\\t");
        case '\b' -> out.append("\\b");
        case '\f' -> out.append("\\f");
        default -> out.append(c < 0x20 ? String.format("\\u%04x", (int) c) : String.valueOf(c));
      }
    }
    return out.append('"').toString();
  }

  /** Exponential backoff, jittered over the upper half: 100 ms, 200 ms, ... up to max. */
  static final class Backoff {
    private final long initialMs;
    private final long maxMs;
    private long currentMs;

    Backoff(long initialMs, long maxMs) {
      this.initialMs = initialMs;
      this.maxMs = maxMs;
      this.currentMs = initialMs;
    }

    long next() {
      long delay = currentMs / 2 + ThreadLocalRandom.current().nextLong(currentMs / 2 + 1);
      currentMs = Math.min(currentMs * 2, maxMs);
      return delay;
    }

    void reset() {
      currentMs = initialMs;
    }
  }
}
