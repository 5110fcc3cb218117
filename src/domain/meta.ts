import { invalidAt } from "../errors/keygate-error.js";

/** Key meta is returned by every verification, so it is kept small; identities may carry more (as in Unkey). */
export const MAX_KEY_META_BYTES = 64 * 1024;
export const MAX_IDENTITY_META_BYTES = 1024 * 1024;

/**
 * How deeply meta may nest objects and arrays (`{ "a": { "b": 1 } }` is 2 levels). Meta is copied, stored and
 * serialised by recursive code (JSON.stringify, structuredClone); a few thousand levels fit in a body under the
 * size limits and would overflow the stack there.
 */
export const MAX_META_DEPTH = 100;

/** Refuses meta that nests deeper than MAX_META_DEPTH or whose JSON is larger than `maxBytes`. */
export function checkMeta(meta: Record<string, unknown> | null | undefined, maxBytes: number, location: string): void {
  if (meta === null || meta === undefined) return;
  if (nestsDeeperThan(meta, MAX_META_DEPTH)) {
    throw invalidAt(
      location,
      `must not nest objects and arrays more than ${MAX_META_DEPTH} levels deep`,
      "flatten it, or keep deep data elsewhere and store a reference",
    );
  }
  const bytes = Buffer.byteLength(JSON.stringify(meta));
  if (bytes > maxBytes)
    throw invalidAt(
      location,
      `must be at most ${maxBytes} bytes as JSON (it is ${bytes})`,
      "keep large data elsewhere and store a reference",
    );
}

/**
 * Whether `value` nests objects and arrays more than `limit` levels deep. Iterative and depth-first, one frame per
 * level: it measures any depth without recursion, and its memory grows with the depth walked, not the width.
 */
function nestsDeeperThan(value: object, limit: number): boolean {
  const frames: { children: unknown[]; next: number }[] = [{ children: Object.values(value), next: 0 }];
  while (frames.length > 0) {
    const frame = frames[frames.length - 1] as { children: unknown[]; next: number };
    if (frame.next === frame.children.length) {
      frames.pop();
      continue;
    }
    const child = frame.children[frame.next++];
    if (child === null || typeof child !== "object") continue;
    // `child` sits one level below the deepest frame.
    if (frames.length + 1 > limit) return true;
    frames.push({ children: Object.values(child), next: 0 });
  }
  return false;
}
