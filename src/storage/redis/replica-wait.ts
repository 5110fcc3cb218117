import { KeygateError } from "../../errors/keygate-error.js";
import type { RedisClient } from "./topology.js";

export interface ReplicaWaitSettings {
  /** How many replicas must have confirmed a management write before it is acknowledged. */
  replicas: number;
  /** How long to wait for them (Redis WAIT's timeout). */
  timeoutMs: number;
}

/**
 * A management write that the master applied but fewer replicas than asked confirmed in time. It may still reach
 * them, or be lost if the master fails first, so the caller is not told it succeeded. It says nothing about
 * Redis being unavailable, so the circuit breaker does not count it.
 */
export class WriteNotReplicatedError extends KeygateError {
  constructor(confirmed: number, settings: ReplicaWaitSettings) {
    super(
      "err:unkey:application:service_unavailable",
      `The change was written but ${confirmed} of ${settings.replicas} required replicas confirmed it within ${settings.timeoutMs} ms; it may be lost if Redis fails over. Read it back before retrying.`,
    );
    this.name = "WriteNotReplicatedError";
  }
}

/**
 * The client with management writes (the atomic batch script) followed by WAIT on the same connection, in one
 * pipeline so that on a Cluster both go to the master of the batch's slot. Every other command passes through.
 */
export function waitingForReplicas<C extends RedisClient>(redis: C, settings: ReplicaWaitSettings): C {
  const applyBatch = async (numberOfKeys: number, ...args: string[]): Promise<number> => {
    const replies =
      (await redis
        .pipeline()
        .keygateApplyBatch(numberOfKeys, ...args)
        .wait(settings.replicas, settings.timeoutMs)
        .exec()) ?? [];
    const [[batchError, failedCheck] = [], [waitError, confirmed] = []] = replies;
    if (batchError) throw batchError;
    if (waitError) throw waitError;
    // A failed check wrote nothing, so there is nothing to wait for.
    if (failedCheck === 0 && (confirmed as number) < settings.replicas) throw new WriteNotReplicatedError(confirmed as number, settings);
    return failedCheck as number;
  };
  return new Proxy(redis, {
    get(target, property, receiver) {
      if (property === "keygateApplyBatch") return applyBatch;
      const value = Reflect.get(target, property, receiver) as unknown;
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
