/**
 * What happened that an operator asked to be told of (webhooks): the domain posts a notice where it decides, and a
 * sink delivers it later. Notices name keys, identities and namespaces by id, never a key's secret.
 */

/** The key a notice is about, and whose it is. */
export interface KeySubject {
  workspaceId: string;
  apiId: string;
  keyId: string;
  identityId?: string;
  externalId?: string;
}

/** A balance crossing its low threshold, or running out: posted once per crossing, by the verification that crossed. */
export interface CreditsNotice {
  type: "key.credits.low" | "key.credits.exhausted" | "identity.credits.low" | "identity.credits.exhausted";
  /** The key whose verification crossed; for identity.* its identity paid. */
  subject: KeySubject;
  /** The balance after the verification. */
  remaining: number;
  /** The low threshold set on the balance, when one is. */
  threshold?: number;
}

export interface RatelimitNotice {
  type: "ratelimit.exceeded";
  workspaceId: string;
  namespaceId: string;
  namespaceName: string;
  identifier: string;
  limit: number;
  duration: number;
  /** Unix ms when the window that was exceeded ends. */
  reset: number;
  /** The key whose verification was limited, when a key's was. */
  subject?: KeySubject;
}

export interface KeyNotice {
  type: "key.created" | "key.updated" | "key.deleted" | "key.expiring";
  subject: KeySubject;
  /** key.expiring: when the key expires (unix ms). */
  expires?: number;
}

export type Notice = CreditsNotice | RatelimitNotice | KeyNotice;
export type NoticeType = Notice["type"];

/**
 * Where notices go. Called on the request path: post() must return at once and never throw. What it returns
 * resolves once the notice is durable where the sink keeps it (the webhook outbox) or was reported lost; it never
 * rejects. A request that posted a notice waits for it before it is answered (docs/webhooks.md#what-survives-a-crash);
 * one that posted none waits for nothing.
 */
export interface NoticeSink {
  post(notice: Notice): Promise<void>;
  /** Resolves once every notice posted so far is durable or reported lost (a management write, before its answer). */
  settled(): Promise<void>;
}

const DONE: Promise<void> = Promise.resolve();

/** A sink that keeps nothing: the CLI, and tests that do not look. */
export const UNHEARD: NoticeSink = { post: () => DONE, settled: () => DONE };
