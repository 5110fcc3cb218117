import type { FastifyReply, FastifyRequest } from "fastify";

/** The cookie holding a dashboard session's id: httpOnly, SameSite=Strict, sent only under the dashboard's path. */
export const SESSION_COOKIE = "keygate_session";
/** The header a request made with a session carries the session's CSRF token in. */
export const CSRF_HEADER = "x-keygate-csrf-token";

/**
 * Headers on every dashboard answer: scripts, styles and connections from keygate's own origin only (no inline
 * script), never framed, no referrer sent on, no content sniffing, nothing cached by the way.
 */
export const DASHBOARD_SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy":
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; " +
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "x-content-type-options": "nosniff",
  "cross-origin-opener-policy": "same-origin",
};

/** The session id from the request's cookies, if it sent one. */
export function sessionCookie(request: FastifyRequest): string | undefined {
  return cookieNamed(request, SESSION_COOKIE);
}

/** The value of the cookie `name` the request sent, if any (an empty one counts as none). */
export function cookieNamed(request: FastifyRequest, name: string): string | undefined {
  for (const pair of (request.headers.cookie ?? "").split(";")) {
    const at = pair.indexOf("=");
    if (at > 0 && pair.slice(0, at).trim() === name) {
      const value = pair.slice(at + 1).trim();
      return value === "" ? undefined : value;
    }
  }
  return undefined;
}

/**
 * Sets (or, with `maxAgeSeconds` 0, clears) the session cookie. `Secure` when the request came over TLS, to keygate
 * or (X-Forwarded-Proto) to a proxy in front of it: a client that forges the header only makes its own cookie
 * stricter.
 */
export function setSessionCookie(request: FastifyRequest, reply: FastifyReply, path: string, value: string, maxAgeSeconds: number): void {
  setCookie(request, reply, SESSION_COOKIE, path, value, maxAgeSeconds);
}

/** Sets (or clears) an httpOnly, SameSite=Strict cookie under `path`, Secure as setSessionCookie says. */
export function setCookie(
  request: FastifyRequest,
  reply: FastifyReply,
  name: string,
  path: string,
  value: string,
  maxAgeSeconds: number,
): void {
  const overTls =
    (request.raw.socket as { encrypted?: boolean }).encrypted === true ||
    String(request.headers["x-forwarded-proto"] ?? "")
      .split(",")[0]
      ?.trim()
      .toLowerCase() === "https";
  const attributes = [`${name}=${value}`, `Path=${path}`, `Max-Age=${maxAgeSeconds}`, "HttpOnly", "SameSite=Strict"];
  if (overTls) attributes.push("Secure");
  reply.header("set-cookie", attributes.join("; "));
}
