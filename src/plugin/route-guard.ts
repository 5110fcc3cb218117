import type { FastifyBaseLogger, FastifyReply, FastifyRequest, preHandlerAsyncHookHandler } from "fastify";
import type { ApiService } from "../domain/apis/api-service.js";
import { keyauthVerifyRequest } from "../domain/routes/policy-compiler.js";
import type { ValidVerification } from "../domain/verification/verification.js";
import type { VerificationService } from "../domain/verification/verification-service.js";
import { ERROR_CATALOGUE } from "../errors/catalogue.js";
import { KeygateError } from "../errors/keygate-error.js";
import { missingKeyDenial, unknownApiDenial, verificationDenial } from "../gateway/decision.js";
import { extractKey } from "../gateway/key-extraction.js";
import { ratelimitHeaders } from "../gateway/ratelimit-headers.js";
import { errorBody, errorMediaType } from "../http/error-envelope.js";
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

/** What a route guard uses of the services: the one verification path, and where an API lives. */
export interface GuardServices {
  readonly apis: Pick<ApiService, "workspaceOf">;
  readonly verification: Pick<VerificationService, "verify">;
}

const NO_NAMES: readonly string[] = [];

/**
 * Route guards over one set of services: each verifies a request's key on the one verification path (cache, the
 * route's permission query, named limits and credits in one all-or-nothing step) and either refuses in keygate's
 * envelope or leaves the principal on `request.keygate`.
 */
export class RouteGuards {
  private readonly services: GuardServices;
  private readonly docsUrl: string;
  private readonly log: FastifyBaseLogger;
  /** The workspace of each API, kept once found (API ids are never reused); absences are not kept. */
  private readonly workspaces = new Map<string, string>();

  constructor(services: GuardServices, docsUrl: string, log: FastifyBaseLogger) {
    this.services = services;
    this.docsUrl = docsUrl;
    this.log = log;
  }

  /** The preHandler protecting a route with `route`'s options; `realm` names the route in challenges. */
  guard(route: CompiledRouteOptions, realm: string): preHandlerAsyncHookHandler {
    return async (request, reply) => {
      try {
        const refusal = await this.verify(request, reply, route, realm);
        if (refusal) return this.refuse(request, reply, refusal);
      } catch (error) {
        // Store failures are catalogue errors (503 and the like): answered in the envelope, like every refusal.
        if (error instanceof KeygateError) return this.refuse(request, reply, error);
        throw error;
      }
      return undefined;
    };
  }

  /** Undefined when the request may go on (its principal set), else why not. */
  private async verify(
    request: FastifyRequest,
    reply: FastifyReply,
    route: CompiledRouteOptions,
    realm: string,
  ): Promise<KeygateError | undefined> {
    const { keyauth } = route;
    const queryAt = request.url.indexOf("?");
    const key = extractKey(keyauth.keySources, request.headers, queryAt === -1 ? "" : request.url.slice(queryAt + 1));
    if (key === undefined) return missingKeyDenial(keyauth, realm).error;
    const workspaceId = await this.workspaceOf(route.apiId);
    if (workspaceId === undefined) {
      this.log.warn({ route: realm, apiId: route.apiId }, "the route's API does not exist; every request is refused");
      return unknownApiDenial(keyauth, realm).error;
    }
    const asked = keyauthVerifyRequest(keyauth, request.id, workspaceId, key, request.ip);
    if (route.tags) asked.tags = route.tags;
    const verification = await this.services.verification.verify(asked);
    if (!verification.valid) return verificationDenial(keyauth, realm, workspaceId, verification).error;
    request.keygate = principalOf(verification);
    const headers = ratelimitHeaders(verification.limits, verification.decidedAt);
    for (const name in headers) reply.header(name, headers[name]);
    return undefined;
  }

  private refuse(request: FastifyRequest, reply: FastifyReply, error: KeygateError): FastifyReply {
    const status = ERROR_CATALOGUE[error.code].status;
    for (const name in error.headers) reply.header(name, error.headers[name]);
    return reply
      .code(status)
      .header("x-request-id", request.id)
      .header("content-type", errorMediaType(status))
      .send(JSON.stringify(errorBody(request.id, error, this.docsUrl)));
  }

  private async workspaceOf(apiId: string): Promise<string | undefined> {
    const known = this.workspaces.get(apiId);
    if (known !== undefined) return known;
    const workspaceId = await this.services.apis.workspaceOf(apiId);
    if (workspaceId === null) return undefined;
    this.workspaces.set(apiId, workspaceId);
    return workspaceId;
  }
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
