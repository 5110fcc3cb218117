import type { Clock } from "../../lib/clock.js";
import type { CallDecision, CounterCall, RatelimitBatchStore } from "../counter-interfaces.js";

/**
 * This instance's estimate of the time a shared store decides at (Redis TIME), for decisions made here without
 * asking it: the local clock plus the offset measured at the last answer the store decided on its own time,
 * counted from when that batch was sent. The estimate errs towards the future, so it never places a call in a
 * window the store has left, and it sees window usage at most as high as the store would.
 */
export class StoreClock {
  private readonly clock: Clock;
  /** Store time minus local time at the last answer decided on the store's time; undefined before the first. */
  private offsetMs: number | undefined;

  constructor(clock: Clock) {
    this.clock = clock;
  }

  /** The time a call is decided at: the caller's `now`, else the estimate (undefined before the first answer). */
  at(now: number | undefined): number | undefined {
    return now ?? (this.offsetMs === undefined ? undefined : this.clock.now() + this.offsetMs);
  }

  /** `store`, with every answer decided on the store's own time measured. */
  measuring(store: RatelimitBatchStore): RatelimitBatchStore {
    return {
      applyBatch: async (workspaceId: string, calls: readonly CounterCall[], now?: number): Promise<CallDecision[]> => {
        const sentAt = this.clock.now();
        const decisions = await store.applyBatch(workspaceId, calls, now);
        const decidedAt = decisions[0]?.outcome.now;
        if (now === undefined && decidedAt !== undefined) this.offsetMs = decidedAt - sentAt;
        return decisions;
      },
    };
  }
}
