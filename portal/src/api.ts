// The portal's only way to keygate: its session endpoints and the customer's procedures under /portal/<slug>/api,
// with the session's CSRF token on every call after the session is known.

export interface PortalSession {
  portal: { slug: string; displayName: string; logoUrl?: string; primaryColor?: string };
  externalId: string;
  scopes: string[];
  returnUrl?: string;
  csrfToken: string;
  expiresAt: number;
  apiIds: string[];
}

export interface PortalKey {
  keyId: string;
  start: string;
  name?: string;
  enabled: boolean;
  createdAt: number;
  expires?: number;
  lastUsed?: number;
  verifications?: number;
  credits?: { remaining: number | null };
}

export interface Point {
  time: number;
  total: number;
  valid: number;
  rateLimited: number;
  usageExceeded: number;
  [outcome: string]: number;
}

/** A refusal as keygate words it (never a stack trace). */
export class PortalError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

export const slug = location.pathname.split("/")[2] ?? "";
const base = `/portal/${slug}/api`;

async function send<T>(method: string, path: string, body?: unknown, csrf?: string): Promise<T> {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers["content-type"] = "application/json";
  if (csrf !== undefined) headers["x-keygate-csrf-token"] = csrf;
  const init: RequestInit = { method, headers, credentials: "same-origin" };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(`${base}${path}`, init);
  const json = (await response.json().catch(() => ({}))) as { data?: T; error?: { detail?: string } };
  if (!response.ok) throw new PortalError(response.status, json.error?.detail ?? `The portal answered ${response.status}.`);
  return json.data as T;
}

export const redeem = (code: string) => send<PortalSession>("POST", "/session", { code });
export const current = () => send<PortalSession>("GET", "/session");
export const signOut = (csrf: string) => send<unknown>("DELETE", "/session", undefined, csrf);
export const call = <T>(session: PortalSession, procedure: string, body: unknown) =>
  send<T>("POST", `/v2/portal.${procedure}`, body, session.csrfToken);
