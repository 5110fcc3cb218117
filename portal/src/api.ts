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

/** Verifications of one bucket (or one key in it), by outcome. */
export interface Counts {
  total: number;
  valid: number;
  rateLimited: number;
  usageExceeded: number;
  insufficientPermissions: number;
  forbidden: number;
  disabled: number;
  expired: number;
}

export interface Point extends Counts {
  time: number;
  keys?: (Counts & { keyId: string })[];
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
  return (await answer<T>(method, path, body, csrf)).data as T;
}

/** The whole answer: `data`, and `pagination` for a list. */
async function answer<T>(
  method: string,
  path: string,
  body?: unknown,
  csrf?: string,
): Promise<{ data?: T; pagination?: { cursor?: string; hasMore: boolean } }> {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers["content-type"] = "application/json";
  if (csrf !== undefined) headers["x-keygate-csrf-token"] = csrf;
  const init: RequestInit = { method, headers, credentials: "same-origin" };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(`${base}${path}`, init);
  const json = (await response.json().catch(() => ({}))) as {
    data?: T;
    pagination?: { cursor?: string; hasMore: boolean };
    error?: { detail?: string };
  };
  if (!response.ok) throw new PortalError(response.status, json.error?.detail ?? `The portal answered ${response.status}.`);
  return json;
}

export const redeem = (code: string) => send<PortalSession>("POST", "/session", { code });
export const current = () => send<PortalSession>("GET", "/session");
export const signOut = (csrf: string) => send<unknown>("DELETE", "/session", undefined, csrf);
export const call = <T>(session: PortalSession, procedure: string, body: unknown) =>
  send<T>("POST", `/v2/portal.${procedure}`, body, session.csrfToken);
/** A page of a list procedure: its items and the cursor of the next page, if any. */
export const callPage = async <T>(session: PortalSession, procedure: string, body: unknown): Promise<{ items: T[]; cursor?: string }> => {
  const { data, pagination } = await answer<T[]>("POST", `/v2/portal.${procedure}`, body, session.csrfToken);
  return { items: data ?? [], ...(pagination?.cursor ? { cursor: pagination.cursor } : {}) };
};
