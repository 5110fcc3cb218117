import { hash } from "node:crypto";

/** How every key (end-user and root) is stored and looked up: standard base64 of its SHA-256, as Unkey does. */
export function hashKey(plaintext: string): string {
  // The one-shot hash (Node >= 20.12) is much cheaper than createHash().update().digest(), and this runs twice
  // per verification (root key and key).
  return hash("sha256", plaintext, "base64");
}

/** A base64 SHA-256 digest: 32 bytes, 44 characters with padding. */
export const KEY_HASH_PATTERN = /^[A-Za-z0-9+/]{43}=$/;

/** Lower-case hex SHA-256, as other systems commonly store their keys (imports: domain/keys/key-migrations.ts). */
export function sha256Hex(text: string): string {
  return hash("sha256", text, "hex");
}
