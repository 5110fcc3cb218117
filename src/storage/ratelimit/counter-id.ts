import type { WindowCheck } from "../counter-interfaces.js";

/** Names a counter within this instance: a workspace's bucket counted with one limit and duration. */
export function counterId(workspaceId: string, check: WindowCheck): string {
  return `${workspaceId}\u0000${check.limit}\u0000${check.durationMs}\u0000${check.bucket}`;
}

/** Counters this instance remembers something about at most (least recently used are forgotten first). */
export const REMEMBERED_COUNTERS_MAX = 100_000;
