import { Redis } from "ioredis";
import { defineAtomicCommands } from "./atomic.js";
import { type ConnectionSettings, createRedisClient, describeTarget, type RedisClient, type RedisTarget } from "./topology.js";

/**
 * Opens a connection to the configured deployment (one server, a Cluster, or the master Sentinel names) and waits
 * until it answers, at most `connectTimeoutMs`. Every command afterwards has the `commandTimeoutMs` deadline, also
 * while it waits in the offline queue during a reconnect, so a hung or absent Redis is a fast error rather than a
 * stuck request.
 *
 * Start-up fails with a message that names the cause in words (never the password). A cause that retrying cannot
 * change (a wrong or missing password, an unknown host, a database the server does not have) fails at once;
 * anything else (nothing listening yet, no answer) is retried until the deadline, since Redis may be starting
 * at the same time as keygate.
 */
export async function connectRedis(config: RedisTarget & ConnectionSettings): Promise<RedisClient> {
  const redis = createRedisClient(config, config);
  // ioredis reports connection trouble as 'error' events; commands report it to their callers.
  redis.on("error", () => {});
  const where = describeTarget(config);
  const seen: { last?: Failure } = {};
  try {
    const database = config.url !== undefined ? databaseIndex(config.url) : 0;
    await withDeadline(openAndCheck(redis, database, seen), config.connectTimeoutMs, () =>
      seen.last && seen.last.kind !== "no answer"
        ? `${seen.last.cause}, still after ${config.connectTimeoutMs} ms of retrying`
        : `no answer from ${target(redis)} within ${config.connectTimeoutMs} ms`,
    );
  } catch (error) {
    redis.disconnect();
    throw new Error(`cannot use ${where}: ${(error as Error).message}`, { cause: error });
  }
  defineAtomicCommands(redis);
  return redis;
}

/** Why Redis could not be used, in words; `definitive` when retrying cannot change it. */
interface Failure {
  kind: "password" | "database" | "permission" | "unknown host" | "refused" | "no answer" | "other";
  cause: string;
  definitive: boolean;
}

class StartupFailure extends Error {
  readonly failure: Failure;

  constructor(failure: Failure) {
    super(failure.cause);
    this.failure = failure;
  }
}

/**
 * Connects (ioredis retries by its retryStrategy), waits until the connection is ready, checks that the configured
 * database was selected, and PINGs. Rejects at once on a definitive failure; `seen.last` is the latest failure.
 */
async function openAndCheck(redis: RedisClient, database: number, seen: { last?: Failure }): Promise<void> {
  let failDefinitively!: (failure: StartupFailure) => void;
  const definitive = new Promise<never>((_, reject) => (failDefinitively = reject));
  definitive.catch(() => {});
  const onError = (error: unknown) => {
    const failure = describeFailure(error, redis, database);
    seen.last = failure;
    if (failure.definitive) failDefinitively(new StartupFailure(failure));
  };
  redis.on("error", onError);
  // A Cluster client reports each node's trouble (a refused password, say) as 'node error'.
  redis.on("node error", onError);
  try {
    const ready = new Promise<void>((resolve) => redis.once("ready", () => resolve()));
    redis.connect().catch(() => {});
    await Promise.race([ready, definitive]);
    // ioredis selects the database while connecting but only reports a refusal as an 'error' event and carries
    // on in database 0: select it again, so a refusal is an answer here.
    if (database !== 0 && redis instanceof Redis)
      await Promise.race([redis.select(database), definitive]).catch((error: unknown) => Promise.reject(asFailure(error, redis, database)));
    await Promise.race([redis.ping(), definitive]).catch((error: unknown) => Promise.reject(asFailure(error, redis, database)));
  } finally {
    redis.off("error", onError);
    redis.off("node error", onError);
  }
}

function asFailure(error: unknown, redis: RedisClient, database: number): StartupFailure {
  return error instanceof StartupFailure ? error : new StartupFailure(describeFailure(error, redis, database));
}

/** The database index the URL names in its path (or `?db=`): a whole number, 0 when it names none. */
function databaseIndex(url: string): number {
  let text: string;
  try {
    const parsed = new URL(url);
    text = decodeURIComponent(parsed.pathname.slice(1)) || (parsed.searchParams.get("db") ?? "");
  } catch {
    return 0; // ioredis reports an unparseable URL itself
  }
  if (text === "") return 0;
  if (!/^\d{1,9}$/.test(text)) {
    throw new StartupFailure({
      kind: "database",
      cause: `the URL's database '${text}' is not a database index (a whole number such as 0)`,
      definitive: true,
    });
  }
  return Number(text);
}

/** host:port, or the socket path, that a single-server client connects to; the nodes or the master name otherwise. */
function target(redis: RedisClient): string {
  if (!(redis instanceof Redis)) return "any of the cluster's nodes";
  const options = redis.options as { host?: string; port?: number; path?: string; sentinels?: unknown; name?: string };
  if (options.sentinels) return `the master '${options.name}' (as the sentinels name it)`;
  return options.path ?? `${options.host ?? "localhost"}:${options.port ?? 6379}`;
}

/** Names a connection or command failure in words. Reply texts of Redis never hold the password; URLs are not quoted. */
function describeFailure(error: unknown, redis: RedisClient, database: number): Failure {
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: unknown }).code;
  if (/^WRONGPASS\b|invalid password|invalid username-password/i.test(message)) {
    return { kind: "password", cause: "wrong password (or user name): the server refused the credentials in the URL", definitive: true };
  }
  if (/^NOAUTH\b/.test(message)) {
    return { kind: "password", cause: "the server needs a password and the URL gives none (redis://:<password>@host)", definitive: true };
  }
  if (/DB index is out of range/i.test(message)) {
    return {
      kind: "database",
      cause: `database ${database} does not exist on the server (db index out of range: it has fewer databases, see its 'databases' setting)`,
      definitive: true,
    };
  }
  if (/^ERR .*\bSELECT\b/i.test(message)) {
    return { kind: "database", cause: `database ${database} cannot be selected: ${message}`, definitive: true };
  }
  if (/^NOPERM\b/.test(message)) {
    return { kind: "permission", cause: `the Redis user may not run what keygate needs: ${message}`, definitive: true };
  }
  if (code === "ENOTFOUND") {
    return { kind: "unknown host", cause: `unknown host '${hostOf(error, redis)}' (the name does not resolve)`, definitive: true };
  }
  if (code === "ECONNREFUSED" || code === "ENOENT") {
    return { kind: "refused", cause: `nothing is listening on ${target(redis)} (connection refused)`, definitive: false };
  }
  if (code === "ETIMEDOUT" || /timed out/i.test(message))
    return { kind: "no answer", cause: `no answer from ${target(redis)}`, definitive: false };
  return {
    kind: "other",
    cause: `${message}${typeof code === "string" && !message.includes(code) ? ` (${code})` : ""}`,
    definitive: false,
  };
}

/** The host name a failed lookup was for. */
function hostOf(error: unknown, redis: RedisClient): string {
  const hostname = (error as { hostname?: unknown }).hostname;
  if (typeof hostname === "string") return hostname;
  return redis instanceof Redis ? String((redis.options as { host?: string }).host) : "(a cluster node)";
}

/** `work` within `ms`; past it, rejects with the message `describe()` gives then. */
function withDeadline(work: Promise<void>, ms: number, describe: () => string): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(describe())), ms);
  });
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}
