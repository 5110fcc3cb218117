import type { IncomingMessage, OutgoingHttpHeaders } from "node:http";
import type { CompiledCors, CompiledPolicy, KeySource } from "../domain/routes/policy-compiler.js";
import type { VerificationCode } from "../domain/verification/codes.js";
import type { RequestTarget } from "../http/request-target.js";
import type { LoggingPolicy } from "../storage/route-records.js";
import type { BodyCapture } from "./body-capture.js";
import type { GatewaySnapshot } from "./gateway-snapshot.js";
import type { CompiledRoute, DecisionRoute } from "./route-table.js";
import type { UpstreamAbort } from "./upstream-client.js";

/** The head of an answer as keygate wrote it: an object (a plain request) or lines (an answer written on a socket). */
export type AnswerHeaders = OutgoingHttpHeaders | readonly (readonly [string, string])[];

/**
 * What the access phase reads of a route: a gateway route (CompiledRoute), or the policies of a Fastify route under
 * the plugin.
 */
export interface AccessRoute {
  readonly id: string;
  /** Names it in logs and in the realm of a 401's challenge. */
  readonly name: string;
  /** The enabled policies, in order. */
  readonly policies: readonly CompiledPolicy[];
  /** Every place a key may come in, across its keyauth policies. */
  readonly keySources: readonly KeySource[];
  /** The API whose workspace the route serves, when the route names none itself. */
  readonly workspaceApiId: string | undefined;
  readonly definition: { readonly workspaceId?: string };
  /** The enabled cors policies, in order: the first that applies to a request decides. */
  readonly cors: readonly CompiledCors[];
  /** Recorded with each verification (the plugin's `tags`). */
  readonly tags?: readonly string[];
}

/**
 * What the access phase (a route's policies: GatewayDecider.access) reads of a request, whichever door it came
 * through: the gateway's, or a Fastify route's under the plugin.
 */
export interface AccessRequest extends RequestTarget {
  readonly id: string;
  readonly raw: IncomingMessage;
  readonly method: string;
  /** The routes and settings it is served with (their OpenAPI documents), read once when it arrived. */
  readonly snapshot: Pick<GatewaySnapshot, "openApi">;
  /** Its route, for the limit of a body an openapi policy reads. */
  readonly route?: Pick<CompiledRoute, "bodyLimit">;
  /** What its analytics event captures beyond the basics (the route's logging policies that applied). */
  capture?: LoggingPolicy;
  /**
   * The request body, when a policy read it whole (an openapi policy validating it): forwarded from here. A door that
   * read it before the policies run (Fastify, under the plugin) gives it here.
   */
  body?: Buffer;
  /** The CORS headers of every answer to it, when a cors policy of its route applies (cors.ts). */
  cors?: Record<string, string>;
  /**
   * Asked at the forward-auth door: then `method`, `url`, `path` and `query` are the original request's (as its
   * proxy's headers name it), `host` too when they name it, and nothing is forwarded.
   */
  forwardAuth?: true;
}

/**
 * One request the gateway took, a plain request or a WebSocket upgrade: what arrived, its target split once, and
 * what serving it learns, noted as it is learnt for its analytics event, its access log line and the metrics.
 */
export interface GatewayRequest extends AccessRequest {
  /** The request target as received (path and query). */
  readonly url: string;
  /** The socket's peer, read while the socket is there. */
  readonly remoteAddress: string | undefined;
  /** Unix ms of its arrival (the injected clock). */
  readonly time: number;
  /** performance.now() at its arrival. */
  readonly startedAt: number;
  /** The routes and settings it is served with, read once when it arrived: a reload never changes it midway. */
  readonly snapshot: GatewaySnapshot;
  /** The original request's host, at the forward-auth door (the auth request's own Host is its proxy's choice). */
  host?: string;
  /** The route that took it; absent for a request refused before any route could take it. */
  route?: DecisionRoute;
  /** Its route's workspace, once looked up. */
  workspaceId?: string;
  /** The API of its verified key. */
  apiId?: string;
  keyId?: string;
  /** The verification's code, once one was decided. */
  outcome?: VerificationCode;
  /** performance.now() when it was sent upstream, and when the upstream's answer ended or failed. */
  upstreamSentAt?: number;
  upstreamEndedAt?: number;
  /** The status of its answer once written; absent while none is (and for good when the client left first). */
  status?: number;
  /** The head of its answer as written. */
  head?: AnswerHeaders;
  /** Its body as forwarded, and its answer's as the client got it, captured when `capture` asks for them. */
  requestBody?: BodyCapture;
  responseBody?: BodyCapture;
  /** The path it is sent upstream with (before the upstream's own path), when its route strips or rewrites paths. */
  forwardPath?: string;
  /** Its streamed body went past its route's bodyLimit: the upstream call was cut off. */
  bodyTooLarge?: boolean;
  /** A plain request's call to its upstream, once sent: aborted when the client goes away before the answer ends. */
  upstreamCall?: UpstreamAbort;
}
