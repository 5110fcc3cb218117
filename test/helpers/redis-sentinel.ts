import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { LOOPBACK } from "./ports.js";
import { NodeClients, RedisProcess, startOnFreePorts, type Teardown, temporaryDirectory } from "./redis-processes.js";
import { waitFor, waitUntilNoProblems } from "./wait.js";

/**
 * A Redis Sentinel setup of the test's own: one master, one replica and three sentinels (quorum 2) on free
 * loopback ports, each sentinel a `redis-server <conf> --sentinel` (the same binary; no separate redis-sentinel
 * needed). Everything it starts is killed by PID on teardown and its temporary directory removed; every wait is
 * bounded and says what it waited for, with the sentinels' view and the log tails, when it gives up.
 */

export const SENTINEL_MASTER_NAME = "mymaster";

export interface SentinelServer {
  readonly port: number;
  /** redis://127.0.0.1:<port> */
  readonly url: string;
}

export interface RedisSentinelOptions {
  /** down-after-milliseconds (default 1000): how long a silent master takes to be subjectively down. */
  downAfterMs?: number;
  /** failover-timeout (default 3000); a failed failover attempt is retried after twice this. */
  failoverTimeoutMs?: number;
  /** Bound for the setup to settle (default 30 s). */
  startTimeoutMs?: number;
}

export interface RedisSentinel {
  /** The master name the sentinels monitor. */
  readonly name: string;
  /** host and port of each sentinel: `new Redis({ sentinels, name })`. */
  readonly sentinels: readonly { host: string; port: number }[];
  /** redis://127.0.0.1:<port> of each sentinel. */
  readonly sentinelUrls: readonly string[];
  /** The two data servers (master and replica at the start, in that order; roles swap on failover). */
  readonly servers: readonly SentinelServer[];
  /** quorum, down-after-milliseconds and failover-timeout as configured. */
  readonly settings: { readonly quorum: number; readonly downAfterMs: number; readonly failoverTimeoutMs: number };
  /** The server every answering sentinel names as master now (they must agree). */
  master(): Promise<SentinelServer>;
  /**
   * SIGKILLs the current master and waits, at most `timeoutMs` (default 30 s), until every answering sentinel
   * names the other server as master and that server says it is one. `ms` is from the kill to that point.
   */
  killMaster(timeoutMs?: number): Promise<{ killed: SentinelServer; promoted: SentinelServer; ms: number }>;
  /** SIGKILLs a data server without waiting for the sentinels to react. */
  kill(server: SentinelServer): Promise<void>;
  /**
   * Starts a killed data server again with its original arguments (an old master starts as a master) and waits,
   * at most `timeoutMs` (default 40 s), until the sentinels have made it a replica of the current master with its
   * link up. Sentinel waits about 8 s (four hello periods) before it converts a returning old master.
   */
  restart(server: SentinelServer, timeoutMs?: number): Promise<{ ms: number }>;
  /** SIGSTOP on a data server. */
  freeze(server: SentinelServer): void;
  /** SIGCONT after freeze. */
  resume(server: SentinelServer): void;
  /** Waits, at most `timeoutMs` (default 30 s), until healthProblems() finds none. */
  waitUntilHealthy(timeoutMs?: number): Promise<void>;
  /**
   * What keeps the setup from being healthy: a sentinel that does not answer, names another master, sees the
   * master down or in failover, does not know the other sentinels or a running replica (or sees it down); a master
   * that is not one; a running replica that is not linked to the master. Empty when healthy.
   */
  healthProblems(): Promise<string[]>;
  /** The end of a server's or sentinel's log. */
  logTail(server: SentinelServer, lines?: number): string;
}

/** A flat [name, value, name, value, …] reply as a map. */
function pairs(reply: unknown): Map<string, string> {
  const fields = new Map<string, string>();
  if (!Array.isArray(reply)) return fields;
  for (let i = 0; i + 1 < reply.length; i += 2) fields.set(String(reply[i]), String(reply[i + 1]));
  return fields;
}

/** Starts the setup; it is stopped on teardown. */
export async function startRedisSentinel(t: Teardown, options: RedisSentinelOptions = {}): Promise<RedisSentinel> {
  const settings = { quorum: 2, downAfterMs: options.downAfterMs ?? 1_000, failoverTimeoutMs: options.failoverTimeoutMs ?? 3_000 };
  const startTimeoutMs = options.startTimeoutMs ?? 30_000;
  const directory = temporaryDirectory(t, "redis-sentinel");
  const clients = new NodeClients();
  const all: RedisProcess[] = [];
  t.teardown(async () => {
    // Connections first: to a server that is already gone, ioredis's disconnect waits 2 s before it lets go.
    clients.close();
    await Promise.all(all.map((instance) => instance.kill()));
  });

  // Each data server has a directory of its own: a replica stores the RDB it syncs from (dump.rdb), which a
  // restarted old master would otherwise load as its own.
  const home = (port: number) => {
    const path = join(directory, String(port));
    mkdirSync(path, { recursive: true });
    return path;
  };
  const dataArgs = (port: number, replicaOf?: number) => [
    "--port",
    String(port),
    "--bind",
    LOOPBACK,
    "--dir",
    home(port),
    "--save",
    "",
    "--appendonly",
    "no",
    // A (re)joining replica syncs at once instead of after the default 5 s diskless-sync delay.
    "--repl-diskless-sync-delay",
    "0",
    ...(replicaOf === undefined ? [] : ["--replicaof", LOOPBACK, String(replicaOf)]),
  ];
  const [master] = await startOnFreePorts(1, 0, clients, ([port = 0]) => [
    new RedisProcess(`master ${LOOPBACK}:${port}`, port, dataArgs(port)),
  ]);
  all.push(master as RedisProcess);
  const [replica] = await startOnFreePorts(1, 0, clients, ([port = 0]) => [
    new RedisProcess(`replica ${LOOPBACK}:${port}`, port, dataArgs(port, master?.port)),
  ]);
  all.push(replica as RedisProcess);
  const sentinelProcesses = await startOnFreePorts(3, 0, clients, (ports) =>
    ports.map((port) => {
      // Sentinel rewrites its configuration file (it records what it learns), so each gets its own, writable one.
      const file = join(directory, `sentinel-${port}.conf`);
      writeFileSync(
        file,
        [
          `port ${port}`,
          `bind ${LOOPBACK}`,
          `dir ${directory}`,
          `sentinel monitor ${SENTINEL_MASTER_NAME} ${LOOPBACK} ${(master as RedisProcess).port} ${settings.quorum}`,
          `sentinel down-after-milliseconds ${SENTINEL_MASTER_NAME} ${settings.downAfterMs}`,
          `sentinel failover-timeout ${SENTINEL_MASTER_NAME} ${settings.failoverTimeoutMs}`,
          `sentinel parallel-syncs ${SENTINEL_MASTER_NAME} 1`,
          "",
        ].join("\n"),
      );
      return new RedisProcess(`sentinel ${LOOPBACK}:${port}`, port, [file, "--sentinel"]);
    }),
  );
  all.push(...sentinelProcesses);
  const dataProcesses = [master, replica] as RedisProcess[];
  const byPort = new Map(all.map((instance) => [instance.port, instance]));
  const processOf = (server: { port: number }): RedisProcess => {
    const instance = byPort.get(server.port);
    if (!instance) throw new Error(`no server of this setup on port ${server.port}`);
    return instance;
  };
  const servers: SentinelServer[] = dataProcesses.map((instance) => ({ port: instance.port, url: instance.url }));
  const serverOn = (port: number): SentinelServer =>
    servers.find((server) => server.port === port) ?? { port, url: `redis://${LOOPBACK}:${port}` };

  const logTails = (lines = 12) =>
    all
      .map(
        (instance) =>
          `--- ${instance.name}${instance.running ? "" : " (not running)"}${instance.frozen ? " (frozen)" : ""}:\n${instance.logTail(lines)}`,
      )
      .join("\n");
  const diagnostics = async (): Promise<string> => {
    let view = "";
    for (const sentinel of sentinelProcesses.filter((instance) => instance.answering)) {
      try {
        const state = pairs(await clients.call(sentinel.port, "SENTINEL", "MASTER", SENTINEL_MASTER_NAME));
        view += `--- sentinel ${sentinel.port}: master ${state.get("ip")}:${state.get("port")} flags ${state.get("flags")} replicas ${state.get("num-slaves")} other sentinels ${state.get("num-other-sentinels")}\n`;
      } catch (error) {
        view += `--- sentinel ${sentinel.port}: ${(error as Error).message}\n`;
      }
    }
    return `${view}${logTails()}`;
  };

  /** The master port every answering sentinel names, or a reason why there is none. */
  const agreedMaster = async (): Promise<number | string> => {
    const named = new Set<number>();
    for (const sentinel of sentinelProcesses.filter((instance) => instance.answering)) {
      const address = (await clients.call(sentinel.port, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SENTINEL_MASTER_NAME)) as
        | [string, string]
        | null;
      if (!address) return `sentinel ${sentinel.port} names no master`;
      named.add(Number(address[1]));
    }
    if (named.size !== 1) return `sentinels name different masters: ${[...named].join(", ")}`;
    return [...named][0] as number;
  };

  const healthProblems = async (): Promise<string[]> => {
    const problems: string[] = [];
    let masterPort: number | undefined;
    try {
      const agreed = await agreedMaster();
      if (typeof agreed === "string") problems.push(agreed);
      else masterPort = agreed;
    } catch (error) {
      problems.push(`asking the sentinels: ${(error as Error).message}`);
    }
    for (const sentinel of sentinelProcesses.filter((instance) => instance.answering)) {
      try {
        const state = pairs(await clients.call(sentinel.port, "SENTINEL", "MASTER", SENTINEL_MASTER_NAME));
        if (state.get("flags") !== "master") problems.push(`sentinel ${sentinel.port}: master flags ${state.get("flags")}`);
        if (state.get("num-other-sentinels") !== String(sentinelProcesses.length - 1))
          problems.push(`sentinel ${sentinel.port}: knows ${state.get("num-other-sentinels")} other sentinels`);
        const replicas = ((await clients.call(sentinel.port, "SENTINEL", "REPLICAS", SENTINEL_MASTER_NAME)) as unknown[]).map(pairs);
        const runningReplicas = dataProcesses.filter((instance) => instance.running && instance.port !== masterPort);
        for (const instance of runningReplicas) {
          const known = replicas.find((fields) => Number(fields.get("port")) === instance.port);
          if (!known) problems.push(`sentinel ${sentinel.port}: does not know replica ${instance.port}`);
          // Its link as the sentinel reports it is refreshed only every 10 s; the replica's own INFO is checked below.
          else if (known.get("flags") !== "slave")
            problems.push(`sentinel ${sentinel.port}: replica ${instance.port} flags ${known.get("flags")}`);
        }
      } catch (error) {
        problems.push(`sentinel ${sentinel.port}: ${(error as Error).message}`);
      }
    }
    for (const instance of dataProcesses.filter((candidate) => candidate.answering)) {
      try {
        const replication = await clients.info(instance.port, "replication");
        const role = replication.get("role");
        if (instance.port === masterPort && role !== "master") problems.push(`${instance.port}: named master but role ${role}`);
        if (
          instance.port !== masterPort &&
          (role !== "slave" || replication.get("master_port") !== String(masterPort) || replication.get("master_link_status") !== "up")
        )
          problems.push(
            `${instance.port}: role ${role} of ${replication.get("master_port")}, link ${replication.get("master_link_status")}`,
          );
      } catch (error) {
        problems.push(`${instance.port}: ${(error as Error).message}`);
      }
    }
    return problems;
  };

  const waitUntilHealthy = (timeoutMs = 30_000) =>
    waitUntilNoProblems("the sentinel setup is healthy", timeoutMs, healthProblems, diagnostics);

  await waitUntilHealthy(startTimeoutMs);

  const currentMaster = async (): Promise<SentinelServer> => {
    const agreed = await agreedMaster();
    if (typeof agreed === "string") throw new Error(agreed);
    return serverOn(agreed);
  };

  const killMaster = async (timeoutMs = 30_000) => {
    const killed = await currentMaster();
    const successor = servers.find((server) => server.port !== killed.port) as SentinelServer;
    const started = Date.now();
    await processOf(killed).kill();
    await waitFor(
      `the sentinels name ${successor.url} as master and it is one`,
      timeoutMs,
      async (because) => {
        const agreed = await agreedMaster();
        if (agreed !== successor.port) {
          because(typeof agreed === "string" ? agreed : `sentinels name ${agreed}`);
          return undefined;
        }
        const role = (await clients.info(successor.port, "replication")).get("role");
        if (role !== "master") because(`${successor.port} has role ${role}`);
        return role === "master" ? true : undefined;
      },
      diagnostics,
    );
    return { killed, promoted: successor, ms: Date.now() - started };
  };

  const restart = async (server: SentinelServer, timeoutMs = 40_000) => {
    const instance = processOf(server);
    const started = Date.now();
    await instance.start(clients);
    await waitUntilNoProblems(`${server.url} is a replica again and the setup is healthy`, timeoutMs, healthProblems, diagnostics);
    return { ms: Date.now() - started };
  };

  return {
    name: SENTINEL_MASTER_NAME,
    sentinels: sentinelProcesses.map((instance) => ({ host: LOOPBACK, port: instance.port })),
    sentinelUrls: sentinelProcesses.map((instance) => instance.url),
    servers,
    settings,
    master: currentMaster,
    killMaster,
    kill: (server) => processOf(server).kill(),
    restart,
    freeze: (server) => processOf(server).freeze(),
    resume: (server) => processOf(server).resume(),
    waitUntilHealthy,
    healthProblems,
    logTail: (server, lines) => processOf(server).logTail(lines),
  };
}
