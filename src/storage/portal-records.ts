/** What the portal stores keep (times in unix ms; optional fields absent when unset, as in records.ts). */

/** Which keys a portal serves: one API (`keyspace`, Unkey's word) or a gateway route (the APIs its keyauth accepts). */
export interface PortalMapping {
  type: "keyspace" | "route";
  id: string;
}

/** What a key the customer creates in the portal gets, set by the operator. */
export interface PortalKeyDefaults {
  prefix?: string;
  byteLength?: number;
  ratelimits?: { name: string; limit: number; duration: number; autoApply: boolean }[];
  credits?: { remaining: number | null; refill?: { interval: "daily" | "monthly"; amount: number; refillDay?: number } };
  permissions?: string[];
  roles?: string[];
}

export interface PortalRecord {
  id: string;
  workspaceId: string;
  /** Unique across the instance: the pages live at /portal/<slug>. */
  slug: string;
  displayName: string;
  mapping: PortalMapping;
  enabled: boolean;
  logoUrl?: string;
  primaryColor?: string;
  keyDefaults?: PortalKeyDefaults;
  /** Codes and sessions carry the epoch they were made in; a change of mapping moves it on, ending them all. */
  epoch: number;
  createdAt: number;
  updatedAt?: number;
}

/** What a session may do; the vocabulary is Unkey's. */
export type PortalScope = "keys:read" | "keys:create" | "keys:reroll" | "analytics:read";

/** A session as minted by portal.createSession, before and after its code is redeemed. */
export interface PortalGrant {
  /** `ps_…`: names the session, not a credential. */
  sessionId: string;
  workspaceId: string;
  portalId: string;
  epoch: number;
  externalId: string;
  scopes: PortalScope[];
  returnUrl?: string;
  preview?: boolean;
}

/** A one-time code, kept under its SHA-256 for 15 minutes. */
export interface PortalCodeRecord extends PortalGrant {
  hash: string;
  createdAt: number;
  expiresAt: number;
}

/** A redeemed session, kept under the SHA-256 of its access token. */
export interface PortalSessionRecord extends PortalGrant {
  hash: string;
  /** The code it was redeemed from (hashed): a retried redemption from the same browser is recognised by it. */
  codeHash: string;
  /** Sent back in a header with every request the portal's pages make (CSRF). */
  csrfToken: string;
  createdAt: number;
  expiresAt: number;
}
