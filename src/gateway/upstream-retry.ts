import type { IncomingMessage } from "node:http";
import { type Readable, Transform, type TransformCallback } from "node:stream";
import type { UpstreamErrorKind } from "../http/metrics.js";
import type { GatewayRequest } from "./gateway-request.js";
import type { PoolTarget, UpstreamPool } from "./upstream-pool.js";

/** Methods whose request may be sent twice without changing what it does (RFC 9110 §9.2.2). */
const IDEMPOTENT_METHODS: ReadonlySet<string> = new Set(["GET", "HEAD", "OPTIONS", "PUT", "DELETE"]);

/** A request being forwarded, as the retry rules see it. */
export interface Attempts {
  readonly method: string;
  /** The body as forwarded: none, read whole (replayable), or streamed from the client (read once). */
  body: Readable | Buffer | null;
  /** The targets tried so far, the first included. */
  readonly tried: PoolTarget[];
  readonly pool: UpstreamPool;
}

/**
 * The target to try next after a call failed (docs/gateway.md#retries), or undefined. Only while retries are left,
 * and only when it cannot make the upstream act twice: a call that failed before undici had a connection for it
 * (refused, unresolved, not connected in time) sent nothing, whatever its method; one that failed after that is tried
 * again only for an idempotent method whose body is absent or held whole, and not after a timeout (the upstream may
 * still be at work). No answer had begun: the caller checks.
 */
export function retryAfterFailure(attempts: Attempts, connected: boolean, kind: UpstreamErrorKind): PoolTarget | undefined {
  if (!retriesLeft(attempts)) return undefined;
  if (connected && (kind === "timeout" || !IDEMPOTENT_METHODS.has(attempts.method) || !replayable(attempts))) return undefined;
  return next(attempts);
}

/**
 * The target to try next after the upstream answered `status`, or undefined: an idempotent request whose body is
 * absent or held whole, on a status the pool retries, while retries are left; the answer is then not passed on.
 */
export function retryOnStatus(attempts: Attempts, status: number): PoolTarget | undefined {
  if (!attempts.pool.upstream.retry.statuses.has(status) || !retriesLeft(attempts)) return undefined;
  if (!IDEMPOTENT_METHODS.has(attempts.method) || !replayable(attempts)) return undefined;
  return next(attempts);
}

function retriesLeft(attempts: Attempts): boolean {
  return attempts.tried.length <= attempts.pool.upstream.retry.attempts;
}

function replayable(attempts: Attempts): boolean {
  return attempts.body === null || Buffer.isBuffer(attempts.body);
}

function next(attempts: Attempts): PoolTarget | undefined {
  const target = attempts.pool.pick(attempts.tried);
  if (target !== undefined) attempts.tried.push(target);
  return target;
}

/**
 * The body the upstream is sent: the client's, through a stream of its own. undici destroys the body of a call that
 * fails (an upstream that resets the connection once it has read the body, say), and destroying the client's
 * request would close the client's connection before it could be answered; a client that leaves mid-upload still
 * fails the call. The client's body is piped in only once undici first reads: a call that failed before then took
 * nothing of it, and another ClientBody can carry it to another target. With a `limit` (the route's bodyLimit) the
 * stream fails as soon as more than that came (the chunk that went past is not passed on), marking the request
 * `bodyTooLarge`: the upstream call fails with it, before the upstream gets the rest.
 */
export class ClientBody extends Transform {
  private readonly raw: IncomingMessage;
  private readonly limit: number | undefined;
  private readonly request: Pick<GatewayRequest, "bodyTooLarge">;
  private piped = false;
  private passed = 0;

  constructor(raw: IncomingMessage, limit: number | undefined, request: Pick<GatewayRequest, "bodyTooLarge">) {
    super();
    this.raw = raw;
    this.limit = limit;
    this.request = request;
    // An HTTP/2 request reads as complete once its stream has closed, however it closed: `aborted` tells a client that
    // reset its stream mid-upload (whose request then ends, so the pipe would end the upstream's body as if whole).
    raw.once("close", () => {
      if (!raw.complete || raw.aborted) this.destroy(new Error("the client closed the connection before its whole body arrived"));
    });
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.passed += chunk.length;
    if (this.limit === undefined || this.passed <= this.limit) return void callback(null, chunk);
    this.request.bodyTooLarge = true;
    callback(new Error(`the request body passed the route's limit of ${this.limit} bytes`));
  }

  override _read(size: number): void {
    if (!this.piped) {
      this.piped = true;
      this.raw.pipe(this);
    }
    super._read(size);
  }
}
