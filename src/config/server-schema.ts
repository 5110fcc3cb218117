import { Type } from "typebox";
import { Strict, StringEnum } from "../http/schemas.js";
import { DEFAULTS } from "./defaults.js";
import { EMPTY } from "./schema-parts.js";

// The sections about the process itself: server (listening, TLS, timeouts, workers), logging and metrics.

/**
 * `server.tls`: HTTPS (HTTP/2 by ALPN, HTTP/1.1 otherwise) on the main port. Paths of PEM files, read at start-up
 * and again on SIGHUP or when they change (config/tls-files.ts checks them).
 */
export const TlsConfigSchema = Strict({
  /** The server's certificate; intermediates may follow it in the same file. */
  cert: Type.String({ minLength: 1 }),
  /** Its private key (unencrypted). */
  key: Type.String({ minLength: 1 }),
  /** Intermediate CA certificates sent after the certificate, for a `cert` file that holds the certificate alone. */
  ca: Type.Optional(Type.String({ minLength: 1 })),
  /** The cipher suites offered, in OpenSSL's syntax (TLS 1.3's `TLS_` names too); AEAD only by default (tls-files.ts). */
  ciphers: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
});

export const ServerConfigSchema = Strict(
  {
    host: Type.String({ minLength: 1, default: DEFAULTS.host }),
    port: Type.Integer({ minimum: 0, maximum: 65535, default: DEFAULTS.port }),
    /** Serve HTTPS with these files; without it, plain HTTP (behind a proxy that ends TLS, say). */
    tls: Type.Optional(TlsConfigSchema),
    bodyLimit: Type.Integer({ minimum: 1024, maximum: 1024 * 1024 * 1024, default: DEFAULTS.bodyLimitBytes }),
    /** How long a /v2 request's body may take to arrive (408 and closed after that). The gateway's uploads have no such limit. */
    requestTimeoutMs: Type.Integer({ minimum: 100, maximum: 3_600_000, default: DEFAULTS.requestTimeoutMs }),
    /** How long any request's headers may take to arrive (408 and closed after that), on /v2 and the gateway alike. */
    headersTimeoutMs: Type.Integer({ minimum: 100, maximum: 3_600_000, default: DEFAULTS.headersTimeoutMs }),
    /**
     * How long a graceful shutdown (SIGTERM, SIGINT) may take: requests in flight finish, buffers are written; past it,
     * or at a second signal, the process exits at once, saying what was cut.
     */
    shutdownTimeoutMs: Type.Integer({ minimum: 100, maximum: 3_600_000, default: DEFAULTS.shutdownTimeoutMs }),
    /**
     * Processes serving requests (node:cluster): a number, or "auto" for one per available core (one with in-memory
     * stores). More than one needs Redis stores: in-memory stores would be per process.
     */
    // Checked after the schema (checkConsistency), for one clear message rather than one per branch of a union.
    workers: Type.Unsafe<number | "auto">(Type.Union([Type.Integer(), Type.String()], { default: 1 })),
  },
  EMPTY,
);

export const LoggingConfigSchema = Strict(
  {
    level: StringEnum(["fatal", "error", "warn", "info", "debug", "trace", "silent"], { default: DEFAULTS.logLevel }),
    /**
     * The access log: one structured line per request (request id, face, route or procedure, status, duration, key
     * id, client address). false (the default: the gateway's hot path does not pay for it unasked), true, or the
     * fraction of requests to log (0.01: one in a hundred, chosen at random).
     */
    requests: Type.Union([Type.Boolean(), Type.Number({ exclusiveMinimum: 0, maximum: 1 })], { default: false }),
  },
  EMPTY,
);

export const MetricsConfigSchema = Strict(
  {
    /** Prometheus metrics at GET /metrics; false serves none and counts nothing. */
    enabled: Type.Boolean({ default: true }),
    /** When set, GET /metrics needs `Authorization: Bearer <token>`. */
    token: Type.Optional(Type.String({ minLength: 16 })),
    /** When set, /metrics is served on this port of server.host only, and not on the main port. */
    port: Type.Optional(Type.Integer({ minimum: 0, maximum: 65_535 })),
  },
  EMPTY,
);

export const CacheConfigSchema = Strict(
  {
    /**
     * Bytes the in-process caches (key views, unknown keys, root keys, rate limit namespaces) may hold in all, as
     * estimated per entry; shared among them as cache/cache-budget.ts says. The least recently used go first.
     */
    maxBytes: Type.Integer({ minimum: 1024 * 1024, maximum: 64 * 1024 * 1024 * 1024, default: DEFAULTS.cacheMaxBytes }),
  },
  EMPTY,
);
