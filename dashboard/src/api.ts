/**
 * The dashboard's only way to keygate: its session endpoints and the /v2 procedures served under the dashboard's
 * path, authenticated by the httpOnly session cookie and the session's CSRF token. The token lives in memory only
 * (read again from GET session after a reload); the root key is sent once, to sign in, and never kept.
 */

// Types only, erased from the bundle: every /v2 procedure's body and answer, from the schemas the server validates
// and serialises with, so a change to a schema the dashboard relies on fails the dashboard's type check.
import type { PROCEDURES } from "../../src/routes/v2/index.js";

/** Each procedure by name: `{ body, answer: { data, pagination? } }` (see Procedure in src/routes/v2/procedure.ts). */
type Wire = { [P in (typeof PROCEDURES)[number] as P["name"]]: NonNullable<P["~wire"]> };
export type ProcedureName = keyof Wire;
/**
 * A procedure's body as its handler sees it (TypeBox's Static): a field with a default is required here, so the
 * dashboard sends it rather than rely on the server filling it in.
 */
export type BodyOf<N extends ProcedureName> = Wire[N]["body"];
/** What a procedure answers in `data`. */
export type DataOf<N extends ProcedureName> = Wire[N]["answer"]["data"];
/** The procedures that answer a page of a list: `data` an array, with `pagination`. */
export type ListName = {
  [N in ProcedureName]: Wire[N]["answer"] extends { data: unknown[]; pagination: unknown } ? N : never;
}[ProcedureName];

export interface Session {
  workspaceId: string;
  rootKeyId: string;
  csrfToken: string;
  expiresAt: number;
}

export interface FieldError {
  location: string;
  message: string;
}

/** An error answer in keygate's envelope. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly errors: FieldError[];

  constructor(status: number, code: string, detail: string, errors: FieldError[]) {
    super(detail);
    this.status = status;
    this.code = code;
    this.errors = errors;
  }

  /** The message for one field (`body.name` → "must be …"), when the 400 names it. */
  forField(location: string): string | undefined {
    return this.errors.find(
      (error) => error.location === location || error.location.startsWith(`${location}[`) || error.location.startsWith(`${location}.`),
    )?.message;
  }
}

let csrfToken: string | undefined;
let onSessionLost: () => void = () => {};

export function whenSessionLost(callback: () => void): void {
  onSessionLost = callback;
}

async function send(method: string, path: string, body?: unknown): Promise<unknown> {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers["content-type"] = "application/json";
  if (csrfToken !== undefined) headers["x-keygate-csrf-token"] = csrfToken;
  const response = await fetch(`./api/${path}`, {
    method,
    headers,
    credentials: "same-origin",
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const answer = (await response.json().catch(() => ({}))) as {
    data?: unknown;
    pagination?: unknown;
    error?: { type?: string; detail?: string; errors?: FieldError[] };
  };
  if (!response.ok) {
    const code = (answer.error?.type ?? "").split("/").pop() ?? "";
    const error = new ApiError(response.status, code, answer.error?.detail ?? `HTTP ${response.status}`, answer.error?.errors ?? []);
    if (code.endsWith("session_invalid") && path !== "session") {
      csrfToken = undefined;
      onSessionLost();
    }
    throw error;
  }
  return answer;
}

export async function signIn(rootKey: string): Promise<Session> {
  const { data } = (await send("POST", "session", { rootKey })) as { data: Session };
  csrfToken = data.csrfToken;
  return data;
}

/** The session the cookie holds, or null when there is none. */
export async function currentSession(): Promise<Session | null> {
  try {
    const { data } = (await send("GET", "session")) as { data: Session };
    csrfToken = data.csrfToken;
    return data;
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return null;
    throw error;
  }
}

export async function signOut(): Promise<void> {
  await send("DELETE", "session");
  csrfToken = undefined;
}

/** Calls a /v2 procedure as the session's root key and answers its `data`. */
export async function call<N extends ProcedureName>(procedure: N, body: BodyOf<N>): Promise<DataOf<N>> {
  return ((await send("POST", `v2/${procedure}`, body)) as Wire[N]["answer"]).data;
}

/** A list procedure: its items and the cursor of the next page, if any. */
export async function callPage<N extends ListName>(procedure: N, body: BodyOf<N>): Promise<{ items: DataOf<N>; cursor?: string }> {
  const answer = (await send("POST", `v2/${procedure}`, body)) as Wire[N]["answer"];
  return { items: answer.data, ...(answer.pagination.cursor ? { cursor: answer.pagination.cursor } : {}) };
}
