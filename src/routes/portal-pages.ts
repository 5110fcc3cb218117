import { timingSafeEqual } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import fastifyStatic from "@fastify/static";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { Type } from "typebox";
import type { EntryContext } from "../domain/audit/audit-trail.js";
import type { Caller } from "../domain/caller.js";
import type { PortalContext } from "../domain/portals/portal-sessions.js";
import { SESSION_TTL_MS } from "../domain/portals/portal-sessions.js";
import { KeygateError } from "../errors/keygate-error.js";
import { CSRF_HEADER, cookieNamed, DASHBOARD_SECURITY_HEADERS, setCookie } from "../http/dashboard-session.js";
import { Envelope, Strict } from "../http/schemas.js";
import { PORTAL_SESSION_PROCEDURES } from "./v2/portal/index.js";
import { PORTAL_COOKIE } from "./v2/portal/session-routes.js";
import { registerProcedures } from "./v2/procedure.js";

/** Where the build puts the portal's pages (vite, `npm run build`): next to the compiled routes. */
export const PORTAL_FILES = fileURLToPath(new URL("../portal-ui/", import.meta.url));

/** What the portal's pages learn of their session: never the access token (an httpOnly cookie). */
const SessionData = Type.Object({
  portal: Type.Object({
    slug: Type.String(),
    displayName: Type.String(),
    logoUrl: Type.Optional(Type.String()),
    primaryColor: Type.Optional(Type.String()),
  }),
  externalId: Type.String(),
  scopes: Type.Array(Type.String()),
  returnUrl: Type.Optional(Type.String()),
  csrfToken: Type.String(),
  expiresAt: Type.Integer(),
  apiIds: Type.Array(Type.String()),
});

const SLUG = /^[a-z0-9][a-z0-9-]{2,63}$/;

/**
 * The customer portal's pages at /portal/<slug> (static files built from `portal/`, under /portal/_ui/), its session
 * endpoints (`/portal/<slug>/api/session`: redeem a code, read, sign out) and the customer's procedures again under
 * `/portal/<slug>/api/v2/`, with the session cookie (httpOnly, SameSite=Strict, Secure behind TLS, scoped to the
 * portal's path) and the session's CSRF token. Same headers as the dashboard: no inline script, nothing framed.
 */
export async function portalPageRoutes(app: FastifyInstance): Promise<void> {
  const sessions = app.services.portals.sessions;
  app.addHook("onRequest", async (_request, reply) => {
    reply.headers(DASHBOARD_SECURITY_HEADERS);
  });

  const answer = (request: FastifyRequest, reply: FastifyReply, context: Pick<PortalContext, "session" | "portal" | "apiIds">) => {
    reply.header("cache-control", "no-store");
    const { portal, session } = context;
    return {
      meta: { requestId: request.id },
      data: {
        portal: { slug: portal.slug, displayName: portal.displayName, logoUrl: portal.logoUrl, primaryColor: portal.primaryColor },
        externalId: session.externalId,
        scopes: session.scopes,
        returnUrl: session.returnUrl,
        csrfToken: session.csrfToken,
        expiresAt: session.expiresAt,
        apiIds: context.apiIds,
      },
    };
  };

  // Redeeming needs no CSRF token: the code is the credential, and only JSON bodies are read (a preflight keygate never grants).
  app.post(
    "/portal/:slug/api/session",
    { schema: { body: Strict({ code: Type.String({ minLength: 1, maxLength: 128 }) }), response: { 200: Envelope(SessionData) } } },
    async (request, reply) => {
      const slug = slugOf(request);
      const exchanged = await sessions.exchangeCode(
        (request.body as { code: string }).code,
        cookieNamed(request, PORTAL_COOKIE),
        entryContext(request),
      );
      const context = await sessions.authenticate(exchanged.accessToken);
      requireSlug(context, slug);
      setCookie(request, reply, PORTAL_COOKIE, `/portal/${slug}`, exchanged.accessToken, Math.floor(SESSION_TTL_MS / 1000));
      return answer(request, reply, context);
    },
  );

  app.get("/portal/:slug/api/session", { schema: { response: { 200: Envelope(SessionData) } } }, async (request, reply) => {
    const context = await sessions.authenticate(cookieNamed(request, PORTAL_COOKIE));
    requireSlug(context, slugOf(request));
    return answer(request, reply, context);
  });

  app.delete("/portal/:slug/api/session", async (request, reply) => {
    const slug = slugOf(request);
    const token = cookieNamed(request, PORTAL_COOKIE);
    const context = await sessions.authenticate(token);
    requireSlug(context, slug);
    requireCsrf(request, context);
    await sessions.signOut(token as string, entryContext(request));
    setCookie(request, reply, PORTAL_COOKIE, `/portal/${slug}`, "", 0);
    reply.header("cache-control", "no-store");
    return { meta: { requestId: request.id }, data: {} };
  });

  await app.register(
    async (withSession) => {
      withSession.decorateRequest("caller", null as unknown as Caller);
      withSession.addHook("onRequest", async (request) => {
        const context = await sessions.authenticate(cookieNamed(request, PORTAL_COOKIE));
        requireSlug(context, slugOf(request));
        requireCsrf(request, context);
        request.caller = context.caller;
        request.portalContext = context;
        request.keyId = context.session.sessionId;
      });
      registerProcedures(withSession, PORTAL_SESSION_PROCEDURES, "portal");
    },
    { prefix: "/portal/:slug/api" },
  );

  if (!existsSync(PORTAL_FILES)) {
    app.log.warn({ path: PORTAL_FILES }, "the portal's pages are not built (npm run build): only its endpoints are served");
    return;
  }
  const page = readFileSync(new URL("index.html", `file://${PORTAL_FILES}`), "utf8");
  await app.register(fastifyStatic, {
    root: PORTAL_FILES,
    prefix: "/portal/_ui/",
    decorateReply: false,
    cacheControl: false,
    index: false,
    setHeaders: (response) => response.setHeader("cache-control", "public, max-age=31536000, immutable"),
  });
  // Every other GET under /portal/ is the page (it finds its slug in the address): the application, not a gateway
  // route, serves the whole prefix.
  app.get("/portal/*", async (_request, reply) => {
    reply.header("cache-control", "no-store").type("text/html; charset=utf-8");
    return page;
  });
}

function slugOf(request: FastifyRequest): string {
  const slug = (request.params as { slug?: string }).slug ?? "";
  if (!SLUG.test(slug)) throw new KeygateError("err:unkey:data:portal_not_found", `There is no portal '${slug}'.`);
  return slug;
}

/** A session belongs to the pages of its own portal only. */
function requireSlug(context: PortalContext, slug: string): void {
  if (context.portal.slug !== slug)
    throw new KeygateError("err:unkey:authentication:portal_session_not_found", "This session belongs to another portal.");
}

function requireCsrf(request: FastifyRequest, context: PortalContext): void {
  const presented = request.headers[CSRF_HEADER];
  const expected = Buffer.from(context.session.csrfToken);
  const given = Buffer.from(typeof presented === "string" ? presented : "");
  if (expected.length !== given.length || !timingSafeEqual(expected, given))
    throw new KeygateError(
      "err:keygate:authorization:csrf_token_invalid",
      `Requests made with a portal session must carry the session's CSRF token in the ${CSRF_HEADER} header.`,
    );
}

/** The request as the audit log records where a customer's action came from. */
function entryContext(request: FastifyRequest): EntryContext {
  return { requestId: request.id, clientAddress: request.ip, userAgent: request.headers["user-agent"] ?? "" };
}
