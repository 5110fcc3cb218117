import { createHash } from "node:crypto";

/** How every key (end-user and root) is stored and looked up: standard base64 of its SHA-256, as Unkey does. */
export function hashKey(plaintext: string): string {
  return createHash("sha256").update(plaintext).digest("base64");
}

/** A base64 SHA-256 digest: 32 bytes, 44 characters with padding. */
export const KEY_HASH_PATTERN = /^[A-Za-z0-9+/]{43}=$/;
