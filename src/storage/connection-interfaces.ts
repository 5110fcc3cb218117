import type { CircuitState } from "../lib/circuit-breaker.js";

// What the shared store's connection offers beside its records: its health, and messages to every instance.

export type CommandListener = (command: string, seconds: number) => void;

/** Whether the shared store answers, for readiness, metrics and the caches that must revalidate after an outage. */
export interface StoreHealth {
  /**
   * "closed" while the store answers; "open" (or "probing") while it does not and calls fail fast (Redis's circuit
   * breaker). In-memory stores are always "closed".
   */
  readonly state: CircuitState;
  /** Calls `listener` on every change of `state`. */
  onStateChange(listener: (state: CircuitState) => void): void;
  /** Asks the store for an answer (readiness); rejects when it gives none. */
  check(): Promise<void>;
  /** Calls `listener` after every command with its name and duration (metrics), until the returned function is called. */
  observeCommands(listener: CommandListener): () => void;
}

/** What a subscriber to a Broadcast channel is told. */
export interface BroadcastListener {
  /** A message published on the channel, by any instance (this one included). */
  message(text: string): void;
  /** The subscription was re-established after a break: messages may have been missed meanwhile. */
  resumed(): void;
}

/**
 * Messages to every keygate instance that shares the stores (Redis pub/sub). In-memory stores have no other
 * instance: nothing is carried, and a subscriber never hears anything.
 */
export interface Broadcast {
  publish(channel: string, text: string): Promise<void>;
  /** Resolves once subscribed, with the way to unsubscribe. */
  subscribe(channel: string, listener: BroadcastListener): Promise<() => Promise<void>>;
}
