import { Cluster, type ClusterOptions, Redis, type RedisOptions } from "ioredis";
import { defined } from "../../lib/defined.js";
import { redactUrl } from "../../lib/redact-url.js";
import { APPLY_BATCH_COMMAND } from "./atomic.js";
import { CREDIT_COMMANDS } from "./credit-scripts.js";
import { RATELIMIT_COMMAND } from "./ratelimit-script.js";

/** A connection to any of the three deployments; the stores use only what both clients offer. */
export type RedisClient = Redis | Cluster;

/** Which Redis deployment to use: exactly one form (the configuration's `storage.redis` without its other settings). */
export interface RedisTarget {
  url?: string | undefined;
  cluster?: { nodes: readonly string[] } | undefined;
  sentinel?:
    | { name: string; sentinels: readonly string[]; masterUsername?: string | undefined; masterPassword?: string | undefined }
    | undefined;
}

export interface ConnectionSettings {
  /** Deadline of every command, also while it waits for a reconnect. */
  commandTimeoutMs: number;
  /** Deadline of one attempt to open a socket. */
  connectTimeoutMs: number;
}

/** Keep trying to reconnect, never faster than every 100 ms nor slower than every 2 s. */
const reconnectDelay = (attempt: number): number => Math.min(100 * attempt, 2_000);

/** Options every keygate connection shares, whichever the deployment. */
function commonOptions(settings: ConnectionSettings) {
  return {
    connectTimeout: settings.connectTimeoutMs,
    commandTimeout: settings.commandTimeoutMs,
    maxRetriesPerRequest: 1,
    // Commands issued in the same tick share one write: under concurrent load, far fewer syscalls on both sides.
    enableAutoPipelining: true,
    // The rate limit store already sends one script execution per event-loop turn for all the calls of that turn;
    // an auto-pipeline would hold it back another turn.
    autoPipeliningIgnoredCommands: [RATELIMIT_COMMAND],
  } satisfies RedisOptions;
}

/** Creates the client for `target` without connecting (`lazyConnect`); connection.ts opens and checks it. */
export function createRedisClient(target: RedisTarget, settings: ConnectionSettings): RedisClient {
  const common = commonOptions(settings);
  if (target.cluster) {
    const [first] = target.cluster.nodes;
    const nodeAccess = first ? access(first) : {};
    const { enableAutoPipelining, autoPipeliningIgnoredCommands, ...perNode } = common;
    const options = {
      lazyConnect: true,
      enableAutoPipelining,
      // A Cluster auto-pipeline is grouped by the slot of a command's first argument, which for these scripts is
      // their key count, not a key: commands of different slots would share a pipeline, which ioredis refuses.
      autoPipeliningIgnoredCommands: [...autoPipeliningIgnoredCommands, APPLY_BATCH_COMMAND, ...CREDIT_COMMANDS],
      clusterRetryStrategy: reconnectDelay,
      // While a master fails over or a slot moves, a command is tried again every 100 ms, at most 16 times
      // (maxRedirections), each try with the command deadline: then it fails and ratelimit.fail decides.
      retryDelayOnFailover: 100,
      retryDelayOnClusterDown: 100,
      retryDelayOnTryAgain: 100,
      slotsRefreshTimeout: settings.connectTimeoutMs,
      scaleReads: "master",
      redisOptions: { ...perNode, ...nodeAccess },
    } satisfies ClusterOptions;
    return new Cluster(target.cluster.nodes.map(hostAndPort), options);
  }
  if (target.sentinel) {
    const [first] = target.sentinel.sentinels;
    const sentinelAccess = first ? access(first) : {};
    return new Redis({
      ...common,
      lazyConnect: true,
      retryStrategy: reconnectDelay,
      sentinels: target.sentinel.sentinels.map(hostAndPort),
      name: target.sentinel.name,
      ...defined({
        sentinelUsername: sentinelAccess.username,
        sentinelPassword: sentinelAccess.password,
        username: target.sentinel.masterUsername,
        password: target.sentinel.masterPassword,
        // rediss:// sentinels: TLS to them and to the master they name.
        tls: sentinelAccess.tls ? {} : undefined,
        sentinelTLS: sentinelAccess.tls ? {} : undefined,
        enableTLSForSentinelMode: sentinelAccess.tls ? true : undefined,
      }),
      sentinelCommandTimeout: settings.commandTimeoutMs,
      sentinelRetryStrategy: reconnectDelay,
      // A master that lost its role (demoted after a failover, still reachable) answers writes with READONLY:
      // reconnect, which asks the sentinels for the new master, and send the command again there. (ioredis's
      // failoverDetector is left off: it could leave a client that was reconnecting when the switch came without
      // a connection.)
      reconnectOnError: (error: Error) => (error.message.startsWith("READONLY") ? 2 : false),
    });
  }
  if (target.url === undefined) throw new Error("storage.redis names no deployment (url, cluster or sentinel)");
  return new Redis(target.url, { ...common, lazyConnect: true, retryStrategy: reconnectDelay });
}

/** The deployment in words for messages and logs, never with a password. */
export function describeTarget(target: RedisTarget): string {
  if (target.cluster) return `the Redis Cluster at ${target.cluster.nodes.map(redactUrl).join(", ")}`;
  if (target.sentinel)
    return `the master '${target.sentinel.name}' of the Redis Sentinels at ${target.sentinel.sentinels.map(redactUrl).join(", ")}`;
  return `Redis at ${redactUrl(target.url ?? "")}`;
}

function hostAndPort(url: string): { host: string; port: number } {
  const parsed = new URL(url);
  return { host: parsed.hostname.replace(/^\[(.*)\]$/, "$1"), port: parsed.port === "" ? 6379 : Number(parsed.port) };
}

/** User name, password and TLS as a URL gives them (rediss:// means TLS). */
function access(url: string): { username?: string; password?: string; tls?: object } {
  const parsed = new URL(url);
  return defined({
    username: parsed.username !== "" ? decodeURIComponent(parsed.username) : undefined,
    password: parsed.password !== "" ? decodeURIComponent(parsed.password) : undefined,
    tls: parsed.protocol === "rediss:" ? {} : undefined,
  });
}

/** A second, unconnected client to the same deployment with the same settings (a pub/sub subscriber needs its own). */
export function duplicateClient(redis: RedisClient): RedisClient {
  return redis instanceof Cluster ? redis.duplicate([], { lazyConnect: true }) : redis.duplicate({ lazyConnect: true });
}

/**
 * Closes a client: QUIT lets the replies in flight arrive, then disconnect() ends what QUIT leaves open (with
 * Sentinel, the connections that watch for a failover; without it they would reconnect forever).
 */
export async function closeClient(redis: RedisClient): Promise<void> {
  await redis.quit().catch(() => {});
  redis.disconnect();
}
