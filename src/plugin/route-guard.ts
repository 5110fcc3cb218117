import type { FastifyBaseLogger, FastifyReply, FastifyRequest, preHandlerAsyncHookHandler, RouteHandlerMethod } from "fastify";
import type { ValidVerification } from "../domain/verification/verification.js";
import { ERROR_CATALOGUE } from "../errors/catalogue.js";
import { KeygateError } from "../errors/keygate-error.js";
import { applicableCors, noteCors, preflightAnswer } from "../gateway/cors.js";
import type { Decision, GatewayDecider } from "../gateway/decision.js";
import type { AccessRequest, AccessRoute } from "../gateway/gateway-request.js";
import type { CurrentGatewaySnapshot, GatewaySnapshot } from "../gateway/gateway-snapshot.js";
import { errorBody, errorMediaType } from "../http/error-envelope.js";
import { logServerError } from "../http/error-handler.js";
import { splitTarget } from "../http/request-target.js";
import type { CompiledRouteOptions } from "./options.js";

/** Who a request verified by the plugin is: what its handler finds on `request.keygate`. */
export interface KeygatePrincipal {
  keyId: string;
  apiId: string;
  workspaceId: string;
  /** The key's identity (its external id) when it has one, the key otherwise: whom to count or bill. */
  subject: string;
  name?: string;
  identity?: { id: string; externalId: string; meta?: Record<string, unknown> };
  meta?: Record<string, unknown>;
  /** The key's permissions: its own and its roles'. */
  permissions: readonly string[];
  roles: readonly string[];
  /** The key's credits after this request, when it has a balance. */
  credits?: number;
}

/** What the route guards run on: the gateway's access phase, and the stored routes in force. */
export interface GuardParts {
  readonly decider: Pick<GatewayDecider, "access">;
  /** The stored routes as this app has taken them up (RouteSync), for routes that follow one. */
  readonly snapshot: CurrentGatewaySnapshot;
  readonly docsUrl: string;
  readonly log: FastifyBaseLogger;
}

const NO_NAMES: readonly string[] = [];

/**
 * Route guards: each runs a route's policies through the gateway's access phase (GatewayDecider.access, the code
 * that decides the gateway's requests: firewall, openapi, the key on the one verification path with the route's rate
 * limits and credits in one all-or-nothing step) and either refuses in keygate's envelope or leaves the principal on
 * `request.keygate`.
 */
export class RouteGuards {
  private readonly parts: GuardParts;

  constructor(parts: GuardParts) {
    this.parts = parts;
  }

  /** The preHandler protecting a route with `route`'s compiled options. */
  guard(route: CompiledRouteOptions): preHandlerAsyncHookHandler {
    return async (request, reply) => {
      let cors: Record<string, string> | undefined;
      try {
        // Read once: a swap of the stored routes never changes a request midway.
        const snapshot = this.parts.snapshot.current;
        const access = accessRequest(request, snapshot);
        const decision = await this.decide(request, access, route, snapshot);
        // A cors policy's headers go on every answer of the route, refusals included (as at the gateway).
        cors = access.cors;
        if (decision.kind === "deny") return this.refuse(request, reply, decision.error, cors);
        if (decision.verification) request.keygate = principalOf(decision.verification);
        const headers = decision.ratelimitHeaders;
        for (const name in headers) reply.header(name, headers[name]);
        if (cors) for (const name in cors) reply.header(name, cors[name]);
      } catch (error) {
        // Store failures are catalogue errors (503 and the like): answered in the envelope, like every refusal.
        if (error instanceof KeygateError) return this.refuse(request, reply, error, cors);
        throw error;
      }
      return undefined;
    };
  }

  /**
   * The handler of the OPTIONS route beside a route with a cors policy (`route`, taking `methods`): a preflight the
   * policy applies to is answered as the gateway answers it (204, or 403 for an origin it does not allow); any other
   * OPTIONS request is not found, as it would be without this route.
   */
  preflight(route: AccessRoute, methods: readonly string[]): RouteHandlerMethod {
    return async (request, reply) => {
      const asked = request.headers["access-control-request-method"];
      if (request.headers.origin === undefined || typeof asked !== "string" || !methods.includes(asked)) return reply.callNotFound();
      const access = accessRequest(request, this.parts.snapshot.current);
      const policy = applicableCors(route, access, asked);
      if (policy === undefined) return reply.callNotFound();
      noteCors(access, route, policy);
      const headers = preflightAnswer(policy, methods, access);
      if (headers === undefined) {
        const detail = `The origin is not allowed by the route's cors policy '${policy.name}'.`;
        return this.refuse(request, reply, new KeygateError("err:keygate:gateway:request_denied", detail), access.cors);
      }
      return reply.code(204).headers(headers).send();
    };
  }

  private decide(
    request: FastifyRequest,
    access: AccessRequest,
    options: CompiledRouteOptions,
    snapshot: GatewaySnapshot,
  ): Promise<Decision> {
    const route = options.kind === "policies" ? options.route : storedRoute(snapshot, options.route, options.tags);
    if (route === undefined) {
      this.parts.log.warn({ route: options.route }, "the stored route a route follows does not exist; every request is refused");
      const detail = `The route '${options.route}' whose policies this request is checked by does not exist.`;
      return Promise.resolve({ kind: "deny", error: new KeygateError("err:keygate:gateway:request_denied", detail) });
    }
    if (route.cors.length > 0) noteCors(access, route);
    // Fastify has read the body already: an openapi policy validates it as parsed.
    if (request.body !== undefined && route.policies.some((policy) => policy.kind === "openapi")) access.body = parsedBody(request.body);
    // The client's address as Fastify's trustProxy makes it.
    return this.parts.decider.access(access, route, () => request.ip);
  }

  private refuse(
    request: FastifyRequest,
    reply: FastifyReply,
    error: KeygateError,
    cors: Record<string, string> | undefined,
  ): FastifyReply {
    const status = ERROR_CATALOGUE[error.code].status;
    logServerError(this.parts.log, error, request.id);
    for (const name in error.headers) reply.header(name, error.headers[name]);
    if (cors) for (const name in cors) reply.header(name, cors[name]);
    return reply
      .code(status)
      .header("x-request-id", request.id)
      .header("content-type", errorMediaType(status))
      .send(JSON.stringify(errorBody(request.id, error, this.parts.docsUrl)));
  }
}

/** A Fastify request as the access phase reads it. */
function accessRequest(request: FastifyRequest, snapshot: GatewaySnapshot): AccessRequest {
  const { path, query } = splitTarget(request.url);
  return { id: request.id, raw: request.raw, method: request.method, path, query, snapshot };
}

/** A body as Fastify parsed it, as bytes again: JSON (keygate's openapi policy validates JSON bodies), or text. */
function parsedBody(body: unknown): Buffer {
  if (Buffer.isBuffer(body)) return body;
  return Buffer.from(typeof body === "string" ? body : JSON.stringify(body));
}

/** The stored route named `name` (or of that id) in `snapshot`, its verifications tagged with `tags`. */
function storedRoute(snapshot: GatewaySnapshot, name: string, tags: readonly string[] | undefined): AccessRoute | undefined {
  const route = snapshot.table.routes.find((each) => each.name === name || each.id === name);
  if (route === undefined || tags === undefined) return route;
  return { ...route, tags };
}

function principalOf(verification: ValidVerification): KeygatePrincipal {
  const { key } = verification;
  const shown = key.shown;
  const principal: KeygatePrincipal = {
    keyId: key.keyId,
    apiId: key.apiId,
    workspaceId: key.workspaceId,
    subject: key.identity?.externalId ?? key.keyId,
    permissions: shown.permissions ?? NO_NAMES,
    roles: shown.roles ?? NO_NAMES,
  };
  if (shown.name !== undefined) principal.name = shown.name;
  if (shown.identity !== undefined) {
    const identity: NonNullable<KeygatePrincipal["identity"]> = { id: shown.identity.id, externalId: shown.identity.externalId };
    if (shown.identity.meta !== undefined) identity.meta = shown.identity.meta;
    principal.identity = identity;
  }
  if (shown.meta !== undefined) principal.meta = shown.meta;
  if (verification.credits !== undefined) principal.credits = verification.credits;
  return principal;
}
