import { invalidAt } from "../errors/keygate-error.js";

/** Key meta is returned by every verification, so it is kept small; identities may carry more (as in Unkey). */
export const MAX_KEY_META_BYTES = 64 * 1024;
export const MAX_IDENTITY_META_BYTES = 1024 * 1024;

/** Refuses meta whose JSON is larger than `maxBytes`. */
export function checkMetaSize(meta: Record<string, unknown> | null | undefined, maxBytes: number, location: string): void {
  if (meta === null || meta === undefined) return;
  const bytes = Buffer.byteLength(JSON.stringify(meta));
  if (bytes > maxBytes) throw invalidAt(location, `must be at most ${maxBytes} bytes as JSON (it is ${bytes})`, "keep large data elsewhere and store a reference");
}
