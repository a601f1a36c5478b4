// How the example reaches the NameServer: a Connect-ES gRPC transport with TLS and RocketMQ 5
// request signing (the README's "Security" section; the same flags as namesrv-admin), and how it
// reads the google.rpc.ErrorInfo the NameServer puts into every error.
import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import { Code, ConnectError, type Interceptor, type Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";

/** Flags every command takes. */
export const connectionOptions = {
  addr: { type: "string", default: "127.0.0.1:8081" },
  "timeout-ms": { type: "string", default: "5000" },
  tls: { type: "boolean", default: false },
  "tls-ca-file": { type: "string" },
  "tls-cert-file": { type: "string" },
  "tls-key-file": { type: "string" },
  "tls-server-name": { type: "string" },
  "access-key": { type: "string" },
  "secret-key": { type: "string" },
} as const;

export interface ConnectionFlags {
  addr: string;
  "timeout-ms": string;
  tls: boolean;
  "tls-ca-file"?: string;
  "tls-cert-file"?: string;
  "tls-key-file"?: string;
  "tls-server-name"?: string;
  "access-key"?: string;
  "secret-key"?: string;
}

/** A bad flag: exit status 2, printed as "COMMAND: message" (the message names the flag, as --topic). */
export class UsageError extends Error {}

/** Milliseconds from a flag, at least `min`. */
export function millis(flag: string, text: string, min = 1): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < min) {
    throw new UsageError(`--${flag}: expected a whole number of milliseconds >= ${min}, got ${JSON.stringify(text)}`);
  }
  return value;
}

/**
 * A gRPC transport to `--addr`: plaintext, or TLS when --tls, --tls-ca-file or --tls-cert-file is
 * given; every call signed when --access-key/--secret-key (or NAMESRV_ACCESS_KEY/NAMESRV_SECRET_KEY)
 * are set. The transport reconnects by itself on the next call after the connection is lost.
 */
export function connect(flags: ConnectionFlags): Transport {
  const accessKey = flags["access-key"] ?? process.env.NAMESRV_ACCESS_KEY ?? "";
  const secretKey = flags["secret-key"] ?? process.env.NAMESRV_SECRET_KEY ?? "";
  if (!flags["tls-cert-file"] !== !flags["tls-key-file"]) {
    throw new UsageError("--tls-cert-file and --tls-key-file: give both or neither");
  }
  if (!accessKey !== !secretKey) {
    throw new UsageError("--access-key and --secret-key: give both or neither");
  }
  if (/[\s,/]/.test(accessKey)) {
    throw new UsageError("--access-key: must not contain white space, commas or slashes");
  }
  const tls = flags.tls || Boolean(flags["tls-ca-file"]) || Boolean(flags["tls-cert-file"]);
  const read = (flag: "tls-ca-file" | "tls-cert-file" | "tls-key-file") => {
    const path = flags[flag];
    try {
      return path ? readFileSync(path) : undefined;
    } catch (error) {
      throw new UsageError(`--${flag} ${path}: ${(error as Error).message}`);
    }
  };
  return createGrpcTransport({
    baseUrl: `${tls ? "https" : "http"}://${flags.addr}`,
    nodeOptions: tls
      ? { ca: read("tls-ca-file"), cert: read("tls-cert-file"), key: read("tls-key-file"), servername: flags["tls-server-name"] }
      : {},
    interceptors: accessKey ? [signer(accessKey, secretKey)] : [],
  });
}

/**
 * Signs every call as RocketMQ 5 clients do: x-mq-date-time (yyyyMMdd'T'HHmmss'Z', UTC) and
 * authorization "MQv2-HMAC-SHA1 Credential=<ak>, SignedHeaders=x-mq-date-time, Signature=<hex
 * HMAC-SHA1(sk, x-mq-date-time)>". Streams are signed when they open.
 */
function signer(accessKey: string, secretKey: string): Interceptor {
  return (next) => async (request) => {
    const dateTime = new Date().toISOString().replace(/[-:]/g, "").replace(/\.\d+Z$/, "Z");
    const signature = createHmac("sha1", secretKey).update(dateTime).digest("hex");
    request.header.set("x-mq-date-time", dateTime);
    request.header.set(
      "authorization",
      `MQv2-HMAC-SHA1 Credential=${accessKey}, SignedHeaders=x-mq-date-time, Signature=${signature}`,
    );
    return next(request);
  };
}

/** google.rpc.ErrorInfo: why a call failed (domain "namesrv.rocketmq", reason UPPER_SNAKE). */
export interface ErrorInfo {
  reason: string;
  domain: string;
  metadata: Map<string, string>;
}

/**
 * The ErrorInfo detail of a failed call, decoded from its wire form (fields 1 reason, 2 domain,
 * 3 map<string, string> metadata), or undefined.
 */
export function errorInfo(error: ConnectError): ErrorInfo | undefined {
  for (const detail of error.details) {
    // Details received from the server are {type, value}; only ones made locally carry a desc.
    if (!("type" in detail) || detail.type !== "google.rpc.ErrorInfo") {
      continue;
    }
    const info: ErrorInfo = { reason: "", domain: "", metadata: new Map() };
    const reader = new BinaryReader(detail.value);
    while (reader.pos < reader.len) {
      const [field, wireType] = reader.tag();
      if (field === 1 && wireType === WireType.LengthDelimited) {
        info.reason = reader.string();
      } else if (field === 2 && wireType === WireType.LengthDelimited) {
        info.domain = reader.string();
      } else if (field === 3 && wireType === WireType.LengthDelimited) {
        const entry = new BinaryReader(reader.bytes());
        let key = "";
        let value = "";
        while (entry.pos < entry.len) {
          const [entryField, entryType] = entry.tag();
          if (entryField === 1) key = entry.string();
          else if (entryField === 2) value = entry.string();
          else entry.skip(entryType);
        }
        info.metadata.set(key, value);
      } else {
        reader.skip(wireType);
      }
    }
    return info;
  }
  return undefined;
}

/** A status code's canonical name (NOT_FOUND, as in google.rpc.Code). */
export function codeName(code: Code): string {
  return Code[code].replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}

/**
 * One line naming the code, the reason and its metadata (sorted), then the server's message (what is
 * wrong, for a person) as a JSON string: error code=INVALID_ARGUMENT reason=INVALID_FIELD
 * domain=namesrv.rocketmq field=topic message="topic: ... is longer than 127 characters". Programs
 * decide by code and reason; the message is printed, never parsed.
 */
export function describeError(thrown: unknown): string {
  const error = ConnectError.from(thrown);
  const info = errorInfo(error);
  const message = `message=${JSON.stringify(error.rawMessage)}`;
  if (!info) {
    return `error code=${codeName(error.code)} reason= ${message}`;
  }
  const metadata = [...info.metadata.keys()].sort().map((key) => ` ${key}=${info.metadata.get(key)}`);
  return `error code=${codeName(error.code)} reason=${info.reason} domain=${info.domain}${metadata.join("")} ${message}`;
}

/** Exponential backoff, jittered over the upper half: 100 ms, 200 ms, ... up to `max`. */
export class Backoff {
  private current: number;

  constructor(
    private readonly initial: number,
    private readonly max: number,
  ) {
    this.current = initial;
  }

  next(): number {
    const delay = this.current / 2 + Math.random() * (this.current / 2);
    this.current = Math.min(this.current * 2, this.max);
    return Math.round(delay);
  }

  reset(): void {
    this.current = this.initial;
  }
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
  });
}
