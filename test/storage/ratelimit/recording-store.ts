import type { CallDecision, CounterCall, RatelimitBatchStore } from "../../../src/storage/counter-interfaces.js";

/** A batch store in front of `store` that records every batch it is given, and can be made to fail. */
export class RecordingStore implements RatelimitBatchStore {
  readonly batches: { workspaceId: string; calls: readonly CounterCall[]; now: number | undefined }[] = [];
  /** While set, every batch fails with this error (nothing reaches `store`). */
  failWith: Error | undefined;
  private readonly store: RatelimitBatchStore;

  constructor(store: RatelimitBatchStore) {
    this.store = store;
  }

  async applyBatch(workspaceId: string, calls: readonly CounterCall[], now?: number): Promise<CallDecision[]> {
    this.batches.push({ workspaceId, calls, now });
    if (this.failWith) throw this.failWith;
    return this.store.applyBatch(workspaceId, calls, now);
  }

  /** Calls that reached the store so far. */
  get calls(): number {
    return this.batches.reduce((sum, batch) => sum + batch.calls.length, 0);
  }
}
