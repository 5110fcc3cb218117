import type { Broadcast, BroadcastListener } from "../interfaces.js";
import { closeClient, duplicateClient, type RedisClient } from "./topology.js";

/**
 * Redis pub/sub between instances, on channels named under the stores' prefix. Each subscription has a connection
 * of its own (a subscribed connection can do nothing else); after a reconnection its listener is told it `resumed`,
 * since messages may have been missed.
 */
export class RedisBroadcast implements Broadcast {
  private readonly redis: RedisClient;
  private readonly prefix: string;

  constructor(redis: RedisClient, prefix: string) {
    this.redis = redis;
    this.prefix = prefix;
  }

  async publish(channel: string, text: string): Promise<void> {
    await this.redis.publish(this.channelName(channel), text);
  }

  async subscribe(channel: string, listener: BroadcastListener): Promise<() => Promise<void>> {
    const name = this.channelName(channel);
    const subscriber = duplicateClient(this.redis);
    subscriber.on("error", () => {});
    let connectedBefore = false;
    subscriber.on("ready", () => {
      if (connectedBefore) listener.resumed();
      connectedBefore = true;
    });
    subscriber.on("message", (from: string, text: string) => {
      if (from === name) listener.message(text);
    });
    await subscriber.connect();
    await subscriber.subscribe(name);
    return () => closeClient(subscriber);
  }

  private channelName(channel: string): string {
    return `${this.prefix}:${channel}`;
  }
}
