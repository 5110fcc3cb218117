import type { FastifyInstance } from "fastify";

declare module "fastify" {
  interface FastifyRequest {
    /** The customer's portal session, on the portal's session procedures only. */
    portalContext?: PortalContext;
  }
  interface FastifyContextConfig {
    /** See ProcedureDefinition.problemJsonErrors; read by the error handler. */
    problemJsonErrors?: boolean;
  }
}

import { type Static, type TSchema, Type } from "typebox";
import type { AuditAction } from "../../domain/audit/audit-trail.js";
import { type Caller, callerInRequest, type RequestContext } from "../../domain/caller.js";
import type { PortalContext } from "../../domain/portals/portal-sessions.js";
import { Envelope, type PaginationData } from "../../http/schemas.js";
import { defined } from "../../lib/defined.js";
import type { Services } from "../../services.js";

export interface ProcedureContext<Body> {
  body: Body;
  caller: Caller;
  services: Services;
  requestId: string;
  /** The address of the connection's peer (no proxy is trusted on /v2): keys.verifyKey's caller, for IP allowlists. */
  clientAddress: string;
  /** The request's User-Agent ("" without one), for the audit log. */
  userAgent: string;
  /** Where the request was sent (`https://host:port`), for URLs keygate answers with (portal.createSession). */
  origin: () => string;
  /** The customer's portal session, for the portal's session procedures (routes/v2/portal/session-routes.ts). */
  portal?: PortalContext;
}

interface BaseDefinition<B extends TSchema> {
  /** `service.procedure`; served at `POST /v2/<name>`. */
  name: string;
  /** Other names served by the same handler (e.g. `ratelimits.limit` for `ratelimit.limit`). */
  aliases?: readonly string[];
  /**
   * Send every error of this procedure as application/problem+json, not only 429s: the official SDK expects
   * that for some procedures (identities.deleteIdentity) and treats any other media type as an unknown error.
   */
  problemJsonErrors?: boolean;
  /**
   * The audit log's actions this procedure may record (docs/audit-log.md), or "none" for a read that changes and
   * reveals nothing. Every write declares its actions: a test fails on one that does not.
   */
  audit: readonly AuditAction[] | "none";
  /** Answer with `Cache-Control: no-store` (answers that carry a credential). */
  noStore?: boolean;
  body: B;
}

export interface ProcedureDefinition<B extends TSchema, D extends TSchema> extends BaseDefinition<B> {
  data: D;
  handler(context: ProcedureContext<Static<B>>): Promise<Static<D>>;
}

export interface PaginatedProcedureDefinition<B extends TSchema, D extends TSchema> extends BaseDefinition<B> {
  data: D;
  handler(context: ProcedureContext<Static<B>>): Promise<{ data: Static<D>; pagination: PaginationData }>;
}

export interface ListProcedureDefinition<B extends TSchema, I extends TSchema> extends BaseDefinition<B> {
  item: I;
  handler(context: ProcedureContext<Static<B>>): Promise<{ items: Static<I>[]; pagination: PaginationData }>;
}

export type AnyProcedure = {
  name: string;
  aliases?: readonly string[];
  problemJsonErrors?: boolean;
  audit: readonly AuditAction[] | "none";
  noStore?: boolean;
  body: TSchema;
  response: TSchema;
  run(context: ProcedureContext<unknown>): Promise<{ data: unknown; pagination?: PaginationData }>;
};

/**
 * A procedure as the define functions make it: at run time an AnyProcedure; its type also keeps the name and what
 * goes over the wire (the body, and the answer's `data` and `pagination`) for readers that import types only, such
 * as the dashboard's api.ts. `~wire` is never set.
 */
export interface Procedure<Name extends string, Body, Answer> extends AnyProcedure {
  name: Name;
  "~wire"?: { body: Body; answer: Answer };
}

/** Name, aliases and error media type, as every kind of procedure declares them. */
function basics<N extends string>(
  definition: BaseDefinition<TSchema> & { name: N },
): { name: N } & Pick<AnyProcedure, "aliases" | "problemJsonErrors" | "audit" | "noStore"> {
  return {
    name: definition.name,
    audit: definition.audit,
    ...defined({
      aliases: definition.aliases,
      problemJsonErrors: definition.problemJsonErrors || undefined,
      noStore: definition.noStore || undefined,
    }),
  };
}

/** A procedure whose answer is `{ meta, data }`. */
export function defineProcedure<N extends string, B extends TSchema, D extends TSchema>(
  definition: ProcedureDefinition<B, D> & { name: N },
): Procedure<N, Static<B>, { data: Static<D> }> {
  return {
    ...basics(definition),
    body: definition.body,
    response: Envelope(definition.data),
    run: async (context) => ({ data: await definition.handler(context as ProcedureContext<Static<B>>) }),
  };
}

/** A procedure whose answer is `{ meta, data, pagination }`, whatever the shape of `data`. */
export function definePaginatedProcedure<N extends string, B extends TSchema, D extends TSchema>(
  definition: PaginatedProcedureDefinition<B, D> & { name: N },
): Procedure<N, Static<B>, { data: Static<D>; pagination: PaginationData }> {
  return {
    ...basics(definition),
    body: definition.body,
    response: Envelope(definition.data, { paginated: true }),
    run: (context) => definition.handler(context as ProcedureContext<Static<B>>),
  };
}

/** A list procedure whose answer is `{ meta, data: [...], pagination }`. */
export function defineListProcedure<N extends string, B extends TSchema, I extends TSchema>(
  definition: ListProcedureDefinition<B, I> & { name: N },
): Procedure<N, Static<B>, { data: Static<I>[]; pagination: PaginationData }> {
  return definePaginatedProcedure({
    ...basics(definition),
    body: definition.body,
    data: Type.Array(definition.item),
    handler: async (context) => {
      const { items, pagination } = await definition.handler(context);
      return { data: items, pagination };
    },
  });
}

/**
 * Registers procedures as `POST /v2/<name>`: the body is validated against the schema, the response serialised
 * by its schema (so nothing outside it can leak), and the result wrapped in the envelope.
 */
export function registerProcedures(
  app: FastifyInstance,
  procedures: readonly AnyProcedure[],
  actorType: RequestContext["actorType"] = "root_key",
): void {
  for (const procedure of procedures) {
    const audited = procedure.audit !== "none";
    for (const name of [procedure.name, ...(procedure.aliases ?? [])]) {
      app.post(
        `/v2/${name}`,
        {
          schema: { body: procedure.body, response: { 200: procedure.response } },
          config: { problemJsonErrors: procedure.problemJsonErrors ?? false },
        },
        async (request, reply) => {
          if (procedure.noStore) reply.header("cache-control", "no-store");
          // A write waits for room for its audit entry, or fails, before anything is changed.
          if (audited) await app.services.audit.admit();
          // On the request path (keys.verifyKey): assignments, no spread (docs/architecture.md#conventions).
          const context: ProcedureContext<unknown> = {
            body: request.body,
            // portal.exchangeCode has no caller: its code is the credential, and the domain names the customer.
            caller:
              audited && request.caller
                ? inRequest(request.caller, actorType, request.id, request.ip, request.headers["user-agent"])
                : request.caller,
            services: app.services,
            requestId: request.id,
            clientAddress: request.ip,
            userAgent: request.headers["user-agent"] ?? "",
            // Worked out only when asked: every other procedure, keys.verifyKey included, leaves it alone.
            origin: () => `${request.protocol}://${request.host}`,
          };
          if (request.portalContext !== undefined) context.portal = request.portalContext;
          const result = await procedure.run(context);
          // Durable before the answer (docs/audit-log.md#what-survives-what): the write's audit entry and the notices
          // it posted are in the outbox (or the journal) before the client hears it is done. Entries and notices of
          // concurrent writes share one append.
          if (audited) await Promise.all([app.services.audit.settled(), app.services.notices.settled()]);
          // Serialised by the response schema, which has pagination only where the procedure gives it.
          return { meta: { requestId: request.id }, data: result.data, pagination: result.pagination };
        },
      );
    }
  }
}

function inRequest(
  caller: Caller,
  actorType: RequestContext["actorType"],
  requestId: string,
  clientAddress: string,
  userAgent: string | undefined,
): Caller {
  return callerInRequest(caller, { actorType, requestId, clientAddress, userAgent: userAgent ?? "" });
}
