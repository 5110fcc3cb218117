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

const SessionData = Type.Object({
  workspaceId: Type.String(),
  rootKeyId: Type.String(),
  csrfToken: Type.String(),
  expiresAt: Type.Integer(),
});

/**
 * The dashboard's session endpoints (`<path>/api/session`: sign in, read, sign out) and every /v2 procedure again
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
      const { sessionId, view } = await sessions.signIn((request.body as { rootKey: string }).rootKey);
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
    const { view } = await sessions.resume(sessionId);
    requireCsrf(request, view);
    await sessions.signOut(sessionId);
    setSessionCookie(request, reply, options.path, "", 0);
    reply.header("cache-control", "no-store");
    return { meta: { requestId: request.id }, data: {} };
  });

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
      registerProcedures(withSession, PROCEDURES);
    },
    { prefix: api },
  );
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
