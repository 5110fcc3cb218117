import { randomBytes } from "node:crypto";
import { base58Encode } from "../../lib/base58.js";

/** How many characters after the prefix `start` shows. */
const START_LENGTH = 4;

/**
 * A new key: `byteLength` random bytes in Base58, written `<prefix>_<base58>` when a prefix is given. `start`
 * is what listings show to recognise it (prefix and the first characters); it cannot recreate the key.
 */
export function generateKey(prefix: string | undefined, byteLength: number): { key: string; start: string } {
  const secret = base58Encode(randomBytes(byteLength));
  const head = prefix === undefined ? "" : `${prefix}_`;
  return { key: `${head}${secret}`, start: `${head}${secret.slice(0, START_LENGTH)}` };
}
