import type { IncomingHttpHeaders, IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import replyFrom from "@fastify/reply-from";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { formatQuery } from "../domain/permissions/query.js";
import type { KeyView } from "../domain/verification/key-view.js";
import type { ExtraLimit, Verification, VerificationCode } from "../domain/verification/verification-service.js";
import { ERROR_CATALOGUE, type ErrorCode } from "../errors/catalogue.js";
import { KeygateError } from "../errors/keygate-error.js";
import { answerClientClosed, errorBody, logServerError, sendError } from "../http/error-handler.js";
import { newId } from "../lib/ids.js";
import { clientAddress } from "./client-address.js";
import { type ForwardedIdentity, pathRefusal, upstreamHeaders, upstreamTarget, upstreamUrl } from "./forwarding.js";
import { endToEndHeaders } from "./hop-by-hop.js";
import { extractKey } from "./key-extraction.js";
import { type AppliedLimit, ratelimitHeaders } from "./ratelimit-headers.js";
import type { GatewayState, RouteState } from "./route-state.js";
import { type CompiledRoute, type IdentifierSource, samePath } from "./route-table.js";
import { relayUpgrade, writeRawResponse } from "./websocket.js";

export interface GatewayOptions {
  state: RouteState;
  docsUrl: string;
  /** Answers a request no route takes (404, or 405 for a known path), as the rest of keygate does. */
  unmatched: (request: FastifyRequest, reply: FastifyReply) => FastifyReply;
}

/** Denials of verification as the gateway answers them: status through the catalogue code, and why. */
const DENIALS: Record<Exclude<VerificationCode, "VALID">, { code: ErrorCode; detail: string }> = {
  NOT_FOUND: { code: "err:keygate:gateway:invalid_key", detail: "The API key is not valid for this API." },
  DISABLED: { code: "err:keygate:gateway:key_disabled", detail: "The API key is disabled." },
  EXPIRED: { code: "err:keygate:gateway:key_expired", detail: "The API key has expired." },
  INSUFFICIENT_PERMISSIONS: {
    code: "err:keygate:gateway:insufficient_permissions",
    detail: "The API key lacks the permissions this route needs.",
  },
  RATE_LIMITED: { code: "err:keygate:gateway:rate_limited", detail: "Too many requests: a rate limit of this API key is exhausted." },
  USAGE_EXCEEDED: { code: "err:keygate:gateway:usage_exceeded", detail: "The API key has no credits left for this request." },
};

/** The parts of a request the gateway decides on; plain requests and WebSocket upgrades both have them. */
interface GatewayRequest {
  id: string;
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  remoteAddress: string | undefined;
}

type Decision =
  | { kind: "unmatched" }
  | { kind: "deny"; error: KeygateError }
  | {
      kind: "allow";
      state: GatewayState;
      route: CompiledRoute;
      workspaceId: string;
      verification: Verification;
      caller: ForwardedIdentity;
      /** Rate limit headers of the response. */
      headers: Record<string, string>;
    };

/**
 * The gateway face of keygate: every request that is not for /v2 is matched against the routes, verified with
 * the one verification path (key, permission query, named limits, namespace limits and credits, all or nothing)
 * and, when allowed, streamed to the route's upstream; WebSocket upgrades pass the same checks. Routes are read
 * once per request from `state`, so a reload never changes a request in flight.
 */
export async function gateway(app: FastifyInstance, options: GatewayOptions): Promise<void> {
  const { state, docsUrl } = options;
  await app.register(replyFrom, {
    undici: { connections: 128, pipelining: 1, keepAliveTimeout: 60_000 },
    disableRequestLogging: true,
    // A failing upstream is answered, never retried: retries would multiply the load on it.
    maxRetriesOn503: 0,
  });
  // Bodies stream through to the upstream unparsed and unbuffered, whatever their type and size.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", (_request, payload, done) => done(null, payload));

  const workspaces = new ApiWorkspaces(app);

  /** Matches, authenticates, verifies: everything short of talking to the upstream. */
  const decide = async (request: GatewayRequest): Promise<Decision> => {
    const current = state.current;
    const path = request.url.split("?", 1)[0] as string;
    const same = samePath(path);
    if (same === "/v2" || same.startsWith("/v2/")) return { kind: "unmatched" };
    // Decided before anything is charged: such a path is never forwarded (see pathRefusal).
    const refusal = pathRefusal(path);
    if (refusal)
      return {
        kind: "deny",
        error: new KeygateError("err:keygate:gateway:invalid_path", `The request path ${refusal}; keygate does not forward it.`),
      };
    const route = current.table.match(request.method, path);
    if (!route) {
      const allowed = current.table.methodsFor(path);
      if (allowed.length === 0) return { kind: "unmatched" };
      return {
        kind: "deny",
        error: new KeygateError(
          "err:user:bad_request:method_not_allowed",
          `${request.method} is not allowed on ${path}; use ${allowed.join(" or ")}.`,
          {
            headers: { allow: allowed.join(", ") },
          },
        ),
      };
    }

    const key = extractKey(route.keySource, request.headers, request.url);
    if (key === undefined) return deny(route, "err:keygate:gateway:missing_key", missingKeyDetail(route));
    const workspaceId = await workspaces.of(route.config.apiId);
    if (workspaceId === null) {
      app.log.warn({ route: route.name, apiId: route.config.apiId }, "the route's API does not exist; every key is refused");
      return deny(route, DENIALS.NOT_FOUND.code, DENIALS.NOT_FOUND.detail);
    }

    // The client as the trusted proxies in front of keygate report it (`gateway.trustProxy`), for identifier `ip`.
    const ip = () => clientAddress(request.remoteAddress, request.headers["x-forwarded-for"], current.trust);
    const verification = await app.services.verification.verify({
      requestId: request.id,
      workspaceId,
      key,
      apiId: route.config.apiId,
      ...(route.permissionQuery ? { permissions: route.permissionQuery } : {}),
      ...(route.config.credits ? { credits: route.config.credits } : {}),
      ...(route.config.ratelimits ? { ratelimits: route.config.ratelimits } : {}),
      ...(route.namespaceLimits.length > 0
        ? { extraLimits: (view: KeyView) => namespaceChecks(app, workspaceId, route, view, request, ip) }
        : {}),
    });

    const limits = appliedLimits(verification);
    const code = verification.data.code;
    if (code !== "VALID") {
      const denial = DENIALS[code];
      const detail =
        code === "INSUFFICIENT_PERMISSIONS" && route.permissionQuery
          ? `${denial.detail} It needs: ${formatQuery(route.permissionQuery)}.`
          : denial.detail;
      const headers = code === "RATE_LIMITED" ? ratelimitHeaders(limits, verification.decidedAt) : {};
      if (code === "USAGE_EXCEEDED" && verification.nextRefillAt !== undefined) {
        headers["retry-after"] = String(Math.max(1, Math.ceil((verification.nextRefillAt - verification.decidedAt) / 1000)));
      }
      return deny(route, denial.code, detail, headers);
    }
    const view = verification.key as KeyView;
    return {
      kind: "allow",
      state: current,
      route,
      workspaceId,
      verification,
      caller: { keyId: view.keyId, ...(view.identity ? { identityId: view.identity.id, externalId: view.identity.externalId } : {}) },
      headers: ratelimitHeaders(limits, verification.decidedAt),
    };
  };

  /**
   * Gives back the credits of an allowed request whose upstream then failed, when the settings say so. The failure
   * is answered once this is done, so a client that sees it finds its credits back. Never rejects.
   */
  const refund = async (decision: Extract<Decision, { kind: "allow" }>): Promise<void> => {
    const { verification, workspaceId, caller } = decision;
    if (!decision.state.settings.refundCreditsOnUpstreamFailure || verification.spentCredits === 0) return;
    try {
      await app.services.keys.refundCredits(workspaceId, caller.keyId, verification.spentCredits);
    } catch (error) {
      app.log.error({ err: error, keyId: caller.keyId }, "could not give back the credits of a failed upstream request");
    }
  };

  const upstreamFailure = (route: CompiledRoute, timedOut: boolean) =>
    timedOut
      ? new KeygateError("err:keygate:gateway:upstream_timeout", `The upstream of route '${route.name}' did not answer in time.`)
      : new KeygateError("err:keygate:gateway:upstream_unreachable", `The upstream of route '${route.name}' cannot be reached.`);

  const handler = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    const decision = await decide({
      id: request.id,
      method: request.method,
      url: request.url,
      headers: request.headers,
      remoteAddress: request.socket.remoteAddress,
    });
    if (decision.kind === "unmatched") return options.unmatched(request, reply);
    if (decision.kind === "deny") return sendError(reply, request, docsUrl, decision.error);
    const { route, state: current, caller } = decision;
    reply.headers(decision.headers);
    const target = upstreamTarget(route, request.url);
    // The query goes apart from the URL: reply-from percent-decodes the URL it is given (to look for ".."), which
    // throws on a stray "%"; and a query is the upstream's to read, whatever it holds.
    return reply.from(target.url, {
      queryString: () => target.query,
      timeout: route.config.timeoutMs ?? current.settings.upstreamTimeoutMs,
      rewriteRequestHeaders: (_request, headers) =>
        upstreamHeaders(route, headers, caller, {
          peer: request.socket.remoteAddress,
          protocol: request.protocol,
          host: request.headers.host,
        }),
      // The upstream's hop-by-hop headers describe its connection to keygate: Node sets the client's own.
      rewriteHeaders: (headers) => endToEndHeaders(headers, "response"),
      onResponse: (_request, upstreamReply, response) => {
        if (response.statusCode < 500) return void upstreamReply.send(response.stream);
        void refund(decision).then(() => upstreamReply.send(response.stream));
      },
      onError: (upstreamReply, { error }) => {
        // A client that goes away mid-upload breaks the upstream request too: not the upstream's failure.
        if (request.socket.destroyed)
          return void refund(decision).then(() => answerClientClosed(upstreamReply as FastifyReply, request, docsUrl));
        request.log.warn({ err: error, route: route.name, upstream: route.upstream.origin }, "upstream failed");
        void refund(decision).then(() =>
          sendError(
            upstreamReply as FastifyReply,
            request,
            docsUrl,
            upstreamFailure(route, (error as { statusCode?: number }).statusCode === 504),
          ),
        );
      },
    });
  };

  const methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];
  app.route({ method: methods, url: "/*", exposeHeadRoute: false, handler });
  app.route({ method: methods, url: "/", exposeHeadRoute: false, handler });

  // WebSocket upgrades bypass Fastify's routing: they are decided here with the same checks, then relayed.
  const answerRaw = (socket: Duplex, requestId: string, error: KeygateError) => {
    const status = ERROR_CATALOGUE[error.code].status;
    writeRawResponse(
      socket,
      status,
      { "content-type": "application/json; charset=utf-8", "x-request-id": requestId, ...error.headers },
      JSON.stringify(errorBody(requestId, error, docsUrl)),
    );
  };
  const onUpgrade = (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    const id = newId("req");
    socket.on("error", () => socket.destroy());
    decide({
      id,
      method: request.method ?? "GET",
      url: request.url ?? "/",
      headers: request.headers,
      remoteAddress: request.socket.remoteAddress,
    })
      .then((decision) => {
        if (decision.kind === "unmatched")
          return answerRaw(
            socket,
            id,
            new KeygateError("err:user:bad_request:route_not_found", `No route takes upgrades at ${(request.url ?? "/").split("?")[0]}.`),
          );
        if (decision.kind === "deny") return answerRaw(socket, id, decision.error);
        const { route, state: current, caller } = decision;
        const headers = upstreamHeaders(route, request.headers, caller, {
          peer: request.socket.remoteAddress,
          protocol: "encrypted" in request.socket ? "https" : "http",
          host: request.headers.host,
        });
        relayUpgrade(request, socket, head, {
          target: upstreamUrl(route, request.url ?? "/"),
          headers,
          timeoutMs: route.config.timeoutMs ?? current.settings.upstreamTimeoutMs,
          requestId: id,
          onUpstreamFailure: (kind, error) => {
            app.log.warn({ err: error, route: route.name }, "upstream failed an upgrade");
            void refund(decision).then(() => answerRaw(socket, id, upstreamFailure(route, kind === "timeout")));
          },
        });
      })
      .catch((error: unknown) => {
        if (error instanceof KeygateError) {
          logServerError(app.log, error, id);
          return answerRaw(socket, id, error);
        }
        app.log.error({ err: error, requestId: id }, "unexpected error on an upgrade");
        answerRaw(
          socket,
          id,
          new KeygateError(
            "err:unkey:application:unexpected_error",
            "Something went wrong inside keygate. Quote the request id when you report it.",
          ),
        );
      });
  };
  app.server.on("upgrade", onUpgrade);
  app.addHook("onClose", async () => {
    app.server.off("upgrade", onUpgrade);
  });

  function deny(route: CompiledRoute, code: ErrorCode, detail: string, headers: Record<string, string> = {}): Decision {
    // Every 401 says where the key goes (RFC 9110).
    if (ERROR_CATALOGUE[code].status === 401) headers["www-authenticate"] = wwwAuthenticate(route);
    return { kind: "deny", error: new KeygateError(code, detail, { headers }) };
  }
}

/** The limits a verification checked, for the rate limit headers. */
function appliedLimits(verification: Verification): AppliedLimit[] {
  return verification.limits.map((limit) => ({
    name: limit.name,
    limit: limit.limit,
    remaining: limit.result.remaining,
    durationMs: limit.durationMs,
    resetAt: limit.result.resetAt,
    passed: limit.result.passed,
  }));
}

/** The route's namespace limits for this request, resolved (overrides applied) to join the key's atomic step. */
async function namespaceChecks(
  app: FastifyInstance,
  workspaceId: string,
  route: CompiledRoute,
  view: KeyView,
  request: GatewayRequest,
  ip: () => string,
): Promise<ExtraLimit[]> {
  const requests = route.namespaceLimits.map((limit) => ({
    namespace: limit.namespace,
    identifier: identifierFor(limit.identifier, view, request, ip),
    limit: limit.limit,
    durationMs: limit.durationMs,
    cost: limit.cost,
  }));
  const resolved = await app.services.ratelimit.resolve(workspaceId, requests, { createMissingNamespaces: true });
  return resolved.map((limit) => ({
    name: limit.request.namespace,
    check: limit.check,
    ...(limit.overrideId !== undefined ? { overrideId: limit.overrideId } : {}),
  }));
}

/**
 * What a namespace limit counts for this request. A key without an identity counts as itself; a request without
 * the named header counts in one shared bucket, "-". `ip` gives the client address, worked out only when asked.
 */
function identifierFor(source: IdentifierSource, view: KeyView, request: GatewayRequest, ip: () => string): string {
  switch (source.kind) {
    case "key":
      return view.keyId;
    case "identity":
      return view.identity?.id ?? view.keyId;
    case "ip":
      return ip();
    case "header": {
      const value = request.headers[source.header];
      const text = (Array.isArray(value) ? value[0] : value)?.trim();
      return text ? text.slice(0, 255) : "-";
    }
  }
}

function missingKeyDetail(route: CompiledRoute): string {
  const source = route.keySource;
  if (source.kind === "query") return `This API needs an API key in the '${source.parameter}' query parameter.`;
  if (source.scheme) return `This API needs an API key: send '${source.header}: ${source.scheme} <key>'.`;
  return `This API needs an API key in the '${source.header}' header.`;
}

/** RFC 9110 challenge naming where the key goes. */
function wwwAuthenticate(route: CompiledRoute): string {
  const source = route.keySource;
  if (source.kind === "header" && source.header === "authorization" && source.scheme) return `${source.scheme} realm="${route.name}"`;
  const where = source.kind === "query" ? `in="query", name="${source.parameter}"` : `in="header", name="${source.header}"`;
  return `ApiKey realm="${route.name}", ${where}`;
}

/** Which workspace owns a route's API: looked up once per API id (ids are never reused), absences not kept. */
class ApiWorkspaces {
  private readonly app: FastifyInstance;
  private readonly known = new Map<string, string>();

  constructor(app: FastifyInstance) {
    this.app = app;
  }

  async of(apiId: string): Promise<string | null> {
    const known = this.known.get(apiId);
    if (known !== undefined) return known;
    const workspaceId = await this.app.services.apis.workspaceOf(apiId);
    if (workspaceId !== null) this.known.set(apiId, workspaceId);
    return workspaceId;
  }
}
