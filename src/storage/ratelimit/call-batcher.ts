import type { CallDecision, CounterCall, RatelimitBatchStore } from "../counter-interfaces.js";

interface PendingCall {
  call: CounterCall;
  resolve(decision: CallDecision): void;
  reject(error: unknown): void;
}

/** Calls waiting for the next batch: all of one workspace (one Cluster slot) and one time argument. */
interface Batch {
  workspaceId: string;
  now: number | undefined;
  calls: PendingCall[];
}

/**
 * Sends the calls made in one turn of the event loop (concurrent requests) to the store together: one batch per
 * workspace and time, in the order the calls were made, split so that no batch uses more than `maxKeysPerBatch`
 * keys (checks and credit checks). The store decides each call as if it had been sent alone, so batching costs no
 * accuracy; a call waits at most for the current turn to end. A batch that fails fails all its calls, and only
 * them.
 */
export class CallBatcher {
  private readonly store: RatelimitBatchStore;
  private readonly maxKeysPerBatch: number;
  private readonly batches = new Map<string, Batch>();
  private flushScheduled = false;

  constructor(store: RatelimitBatchStore, maxKeysPerBatch: number) {
    this.store = store;
    this.maxKeysPerBatch = maxKeysPerBatch;
  }

  decide(workspaceId: string, call: CounterCall, now: number | undefined): Promise<CallDecision> {
    return new Promise((resolve, reject) => {
      const batchKey = now === undefined ? workspaceId : `${workspaceId}\u0000${now}`;
      let batch = this.batches.get(batchKey);
      if (!batch) {
        batch = { workspaceId, now, calls: [] };
        this.batches.set(batchKey, batch);
      }
      batch.calls.push({ call, resolve, reject });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.flushScheduled = false;
    const batches = [...this.batches.values()];
    this.batches.clear();
    for (const { workspaceId, now, calls } of batches) {
      let chunk: PendingCall[] = [];
      let keyCount = 0;
      for (const pending of calls) {
        const keys = keysOf(pending.call);
        if (chunk.length > 0 && keyCount + keys > this.maxKeysPerBatch) {
          this.send(workspaceId, now, chunk);
          chunk = [];
          keyCount = 0;
        }
        chunk.push(pending);
        keyCount += keys;
      }
      this.send(workspaceId, now, chunk);
    }
  }

  private send(workspaceId: string, now: number | undefined, pending: PendingCall[]): void {
    this.store
      .applyBatch(
        workspaceId,
        pending.map(({ call }) => call),
        now,
      )
      .then(
        (decisions) => {
          for (const [index, { resolve }] of pending.entries()) resolve(decisions[index] as CallDecision);
        },
        (error: unknown) => {
          for (const { reject } of pending) reject(error);
        },
      );
  }
}

function keysOf(call: CounterCall): number {
  return call.checks.length + (call.credit ? 1 : 0);
}
