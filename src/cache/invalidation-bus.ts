import { randomBytes } from "node:crypto";
import type { CacheInvalidator } from "../domain/invalidation.js";
import type { Broadcast } from "../storage/interfaces.js";

export type InvalidationMessage =
  | { kind: "key"; workspaceId: string; hash: string }
  /** Many keys at once (an import). Instances of versions before it ignore the kind: their negative entries age out. */
  | { kind: "keys"; workspaceId: string; hashes: readonly string[] }
  | { kind: "workspace"; workspaceId: string }
  | { kind: "rootKey"; hash: string }
  /** The gateway's stored routes changed: the table is at `version` now. */
  | { kind: "routes"; version: number }
  /** Sent to local listeners only, after a gap in which messages may have been missed (a reconnect). */
  | { kind: "everything" };

export type InvalidationListener = (message: InvalidationMessage) => void;

/** The stores' broadcast channel invalidations travel on. */
const CHANNEL = "invalidations";
/** Hashes a "keys" message carries at most (about 50 KB). */
const HASHES_PER_MESSAGE = 1_000;

/**
 * Delivers invalidations to this instance's caches at once, and to every other instance through the stores'
 * broadcast (Redis pub/sub). Without Redis there is only one instance, so local delivery is all there is.
 */
export class InvalidationBus implements CacheInvalidator {
  private readonly listeners: InvalidationListener[] = [];
  private readonly instanceId = randomBytes(8).toString("hex");
  private broadcast: Broadcast | undefined;
  private unsubscribe: (() => Promise<void>) | undefined;

  /** Registers a cache that evicts on every message. */
  listen(listener: InvalidationListener): void {
    this.listeners.push(listener);
  }

  /**
   * Joins the other instances' invalidations on the stores' broadcast. After every break in the subscription the
   * local listeners get "everything", since messages may have been missed: the caches then revalidate what they
   * hold before trusting it.
   */
  async connect(broadcast: Broadcast): Promise<void> {
    this.broadcast = broadcast;
    this.unsubscribe = await broadcast.subscribe(CHANNEL, {
      message: (text) => {
        const { from, message } = JSON.parse(text) as { from: string; message: InvalidationMessage };
        if (from !== this.instanceId) this.deliver(message);
      },
      resumed: () => this.deliver({ kind: "everything" }),
    });
  }

  async keyChanged(workspaceId: string, hash: string): Promise<void> {
    await this.send({ kind: "key", workspaceId, hash });
  }

  async keysChanged(workspaceId: string, hashes: readonly string[]): Promise<void> {
    const messages: Promise<void>[] = [];
    for (let start = 0; start < hashes.length; start += HASHES_PER_MESSAGE) {
      messages.push(this.send({ kind: "keys", workspaceId, hashes: hashes.slice(start, start + HASHES_PER_MESSAGE) }));
    }
    await Promise.all(messages);
  }

  async workspaceChanged(workspaceId: string): Promise<void> {
    await this.send({ kind: "workspace", workspaceId });
  }

  async rootKeyChanged(hash: string): Promise<void> {
    await this.send({ kind: "rootKey", hash });
  }

  async routesChanged(version: number): Promise<void> {
    await this.send({ kind: "routes", version });
  }

  async close(): Promise<void> {
    const unsubscribe = this.unsubscribe;
    this.unsubscribe = undefined;
    await unsubscribe?.();
  }

  private async send(message: InvalidationMessage): Promise<void> {
    this.deliver(message);
    await this.broadcast?.publish(CHANNEL, JSON.stringify({ from: this.instanceId, message }));
  }

  private deliver(message: InvalidationMessage): void {
    for (const listener of this.listeners) listener(message);
  }
}
