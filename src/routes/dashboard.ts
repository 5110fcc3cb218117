import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import fastifyStatic from "@fastify/static";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { Type } from "typebox";
import { DashboardSessionService, type SessionView } from "../domain/dashboard/session-service.js";
import { KeygateError } from "../errors/keygate-error.js";
import { CSRF_HEADER, DASHBOARD_SECURITY_HEADERS, sessionCookie, setSessionCookie } from "../http/dashboard-session.js";
import { Envelope, Strict } from "../http/schemas.js";
import { bodyDeadline } from "../http/slow-requests.js";
import { PROCEDURES } from "./v2/index.js";
import { registerProcedures } from "./v2/procedure.js";

export interface DashboardRouteOptions {
  /** dashboard.path: the dashboard's pages; its endpoints are under `<path>/api`. */
  path: string;
  /** server.requestTimeoutMs: how long a body may take to arrive. */
  requestTimeoutMs: number;
  /** dashboard.sessionAbsoluteTimeoutMs: the session cookie lasts as long as a session can. */
  sessionAbsoluteTimeoutMs: number;
}

/** Where the build puts the dashboard's pages (vite, `npm run build`): next to the compiled routes. */
export const DASHBOARD_FILES = fileURLToPath(new URL("../dashboard-ui/", import.meta.url));

const SessionData = Type.Object({
  workspaceId: Type.String(),
  rootKeyId: Type.String(),
  csrfToken: Type.String(),
  expiresAt: Type.Integer(),
});

/**
 * The dashboard's pages (static files built from `dashboard/`) at `<path>/`, its session endpoints (`<path>/api/session`: sign in, read, sign out) and every /v2 procedure again
 * under `<path>/api/v2/`, authenticated by the session cookie and the session's CSRF token instead of a bearer
 * root key: the same handlers and permission checks, for the root key the session was opened with. The cookie is
 * scoped to the dashboard's path, so it never travels with /v2 calls or to a gateway upstream.
 */
export async function dashboardRoutes(app: FastifyInstance, options: DashboardRouteOptions): Promise<void> {
  const sessions = app.services.dashboardSessions;
  const api = `${options.path}/api`;
  app.addHook("onRequest", async (_request, reply) => {
    reply.headers(DASHBOARD_SECURITY_HEADERS);
  });
  bodyDeadline(app, options.requestTimeoutMs);

  const answer = (request: FastifyRequest, reply: FastifyReply, view: SessionView) => {
    reply.header("cache-control", "no-store");
    return { meta: { requestId: request.id }, data: view };
  };

  // Signing in needs no CSRF token: only JSON bodies are read, which a page of another site cannot send here
  // without a CORS preflight that keygate never grants.
  app.post(
    `${api}/session`,
    {
      schema: {
        body: Strict({ rootKey: Type.String({ minLength: 1, maxLength: 512 }) }),
        response: { 200: Envelope(SessionData) },
      },
    },
    async (request, reply) => {
      const { sessionId, view } = await sessions.signIn((request.body as { rootKey: string }).rootKey, contextOf(request));
      setSessionCookie(request, reply, options.path, sessionId, Math.floor(options.sessionAbsoluteTimeoutMs / 1000));
      return answer(request, reply, view);
    },
  );

  app.get(`${api}/session`, { schema: { response: { 200: Envelope(SessionData) } } }, async (request, reply) => {
    const { view } = await sessions.resume(requireCookie(request));
    return answer(request, reply, view);
  });

  app.delete(`${api}/session`, { schema: { response: { 200: Envelope(Type.Object({})) } } }, async (request, reply) => {
    const sessionId = requireCookie(request);
    const { view, caller } = await sessions.resume(sessionId);
    requireCsrf(request, view);
    await sessions.signOut(sessionId, caller, contextOf(request));
    setSessionCookie(request, reply, options.path, "", 0);
    reply.header("cache-control", "no-store");
    return { meta: { requestId: request.id }, data: {} };
  });

  if (existsSync(DASHBOARD_FILES)) {
    app.get(options.path, (_request, reply) => reply.redirect(`${options.path}/`));
    await app.register(fastifyStatic, {
      root: DASHBOARD_FILES,
      prefix: `${options.path}/`,
      decorateReply: false,
      cacheControl: false,
      // Built assets carry a content hash in their names; the page itself is checked again every time.
      setHeaders: (response, path) =>
        response.setHeader("cache-control", path.includes("/assets/") ? "public, max-age=31536000, immutable" : "no-cache"),
    });
  } else {
    app.log.warn({ path: DASHBOARD_FILES }, "the dashboard's pages are not built (npm run build): only its endpoints are served");
  }

  await app.register(
    async (withSession) => {
      withSession.decorateRequest("caller");
      // As on /v2, the caller is established before the body is read.
      withSession.addHook("onRequest", async (request) => {
        const { caller, view } = await sessions.resume(requireCookie(request));
        requireCsrf(request, view);
        request.caller = caller;
        request.keyId = caller.rootKeyId;
      });
      registerProcedures(withSession, PROCEDURES, "dashboard");
    },
    { prefix: api },
  );
}

function contextOf(request: FastifyRequest): { requestId: string; clientAddress: string; userAgent: string } {
  return { requestId: request.id, clientAddress: request.ip, userAgent: request.headers["user-agent"] ?? "" };
}

function requireCookie(request: FastifyRequest): string {
  const sessionId = sessionCookie(request);
  if (sessionId === undefined) {
    throw new KeygateError("err:keygate:authentication:session_invalid", "No dashboard session: sign in with a root key first.");
  }
  return sessionId;
}

function requireCsrf(request: FastifyRequest, view: SessionView): void {
  const presented = request.headers[CSRF_HEADER];
  if (!DashboardSessionService.csrfMatches(view, typeof presented === "string" ? presented : undefined)) {
    throw new KeygateError(
      "err:keygate:authorization:csrf_token_invalid",
      `Requests made with a dashboard session must carry the session's CSRF token in the ${CSRF_HEADER} header.`,
    );
  }
}
