import { randomBytes } from "node:crypto";
import type { CacheInvalidator } from "../domain/invalidation.js";
import { closeClient, duplicateClient, type RedisClient } from "../storage/redis/topology.js";

export type InvalidationMessage =
  | { kind: "key"; workspaceId: string; hash: string }
  | { kind: "workspace"; workspaceId: string }
  | { kind: "rootKey"; hash: string }
  /** Sent to local listeners only, after a gap in which messages may have been missed (a reconnect). */
  | { kind: "everything" };

export type InvalidationListener = (message: InvalidationMessage) => void;

/**
 * Delivers invalidations to this instance's caches at once, and to every other instance through Redis pub/sub
 * when there is a Redis. Without Redis there is only one instance, so local delivery is all there is.
 */
export class InvalidationBus implements CacheInvalidator {
  private readonly listeners: InvalidationListener[] = [];
  private readonly instanceId = randomBytes(8).toString("hex");
  private publisher: RedisClient | undefined;
  private subscriber: RedisClient | undefined;
  private channel = "";

  /** Registers a cache that evicts on every message. */
  listen(listener: InvalidationListener): void {
    this.listeners.push(listener);
  }

  /**
   * Connects to Redis pub/sub on `<prefix>:invalidations` with a second connection (a subscribed connection can
   * do nothing else). After every reconnect the local listeners get "everything", since messages may have been
   * missed: the caches then revalidate what they hold before trusting it.
   */
  async connect(redis: RedisClient, prefix: string): Promise<void> {
    this.publisher = redis;
    this.channel = `${prefix}:invalidations`;
    const subscriber = duplicateClient(redis);
    subscriber.on("error", () => {});
    let connectedBefore = false;
    subscriber.on("ready", () => {
      if (connectedBefore) this.deliver({ kind: "everything" });
      connectedBefore = true;
    });
    subscriber.on("message", (channel: string, raw: string) => {
      if (channel !== this.channel) return;
      const { from, message } = JSON.parse(raw) as { from: string; message: InvalidationMessage };
      if (from !== this.instanceId) this.deliver(message);
    });
    await subscriber.connect();
    await subscriber.subscribe(this.channel);
    this.subscriber = subscriber;
  }

  async keyChanged(workspaceId: string, hash: string): Promise<void> {
    await this.send({ kind: "key", workspaceId, hash });
  }

  async workspaceChanged(workspaceId: string): Promise<void> {
    await this.send({ kind: "workspace", workspaceId });
  }

  async rootKeyChanged(hash: string): Promise<void> {
    await this.send({ kind: "rootKey", hash });
  }

  async close(): Promise<void> {
    const subscriber = this.subscriber;
    this.subscriber = undefined;
    if (subscriber) await closeClient(subscriber);
  }

  private async send(message: InvalidationMessage): Promise<void> {
    this.deliver(message);
    if (this.publisher) await this.publisher.publish(this.channel, JSON.stringify({ from: this.instanceId, message }));
  }

  private deliver(message: InvalidationMessage): void {
    for (const listener of this.listeners) listener(message);
  }
}
