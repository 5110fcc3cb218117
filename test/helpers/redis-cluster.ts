import { spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { LOOPBACK } from "./ports.js";
import {
  NodeClients,
  parseFields,
  RedisProcess,
  startOnFreePorts,
  type Teardown,
  temporaryDirectory,
  trackChild,
} from "./redis-processes.js";
import { waitFor, waitUntilNoProblems } from "./wait.js";

/**
 * A Redis Cluster of the test's own: 6 redis-server processes (3 masters, 3 replicas) on free loopback ports,
 * joined by `redis-cli --cluster create`, with the operations failover and resharding tests need. Everything it
 * starts is killed by PID on teardown and its temporary directory removed; every wait is bounded and says what it
 * waited for, with the cluster's view and the nodes' log tails, when it gives up.
 */

export const CLUSTER_SLOTS = 16_384;
/** Redis Cluster's bus listens on the node's port + 10000. */
const BUS_PORT_OFFSET = 10_000;

export interface ClusterNode {
  /** Loopback port the node serves clients on. */
  readonly port: number;
  /** redis://127.0.0.1:<port> */
  readonly url: string;
  /** The cluster's 40-hex node id (kept across restarts: each node keeps its nodes.conf). */
  readonly id: string;
}

export interface ClusterMaster extends ClusterNode {
  /** Inclusive slot ranges, as the cluster reports them. */
  readonly slots: readonly (readonly [number, number])[];
  readonly replicas: readonly ClusterNode[];
}

export interface ClusterTopology {
  /** Masters that hold slots, ordered by their first slot. */
  readonly masters: readonly ClusterMaster[];
  /** Replicas the cluster does not consider failed. */
  readonly replicas: readonly ClusterNode[];
}

export interface Reshard {
  /** The slots this reshard moves, known before it starts (redis-cli takes the source's lowest slots first). */
  readonly slots: readonly number[];
  /**
   * Resolves when redis-cli has exited successfully and every answering node agrees that `to` owns the slots
   * (milliseconds from the start to that point); rejects with redis-cli's output otherwise.
   */
  readonly done: Promise<{ ms: number; output: string }>;
}

export interface RedisClusterOptions {
  /** cluster-node-timeout in ms (default 1500): how long a silent node takes to be suspected. */
  nodeTimeoutMs?: number;
  /** Bound for forming the cluster (default 30 s). */
  startTimeoutMs?: number;
}

export interface RedisCluster {
  /** The six nodes, in the order they were started; masters and replicas change roles on failover. */
  readonly nodes: readonly ClusterNode[];
  /** Every node's URL: startup nodes for a cluster client. */
  readonly urls: readonly string[];
  /** cluster-node-timeout in ms. */
  readonly nodeTimeoutMs: number;
  /** Masters (with their slots and replicas) and replicas, as an answering node sees them now. */
  topology(): Promise<ClusterTopology>;
  /** The master that owns `slot` now. */
  masterOf(slot: number): Promise<ClusterMaster>;
  /**
   * SIGKILLs `master` (default: the master of slot 0) and waits, at most `timeoutMs` (default 30 s), until one of
   * its replicas has taken its slots and every answering node reports a healthy cluster. `ms` is from the kill to
   * that point.
   */
  killMaster(master?: ClusterNode, timeoutMs?: number): Promise<{ killed: ClusterNode; promoted: ClusterNode; ms: number }>;
  /** SIGKILLs a node without waiting for the cluster to react. */
  kill(node: ClusterNode): Promise<void>;
  /**
   * Starts a killed node again on its port with its nodes.conf and waits, at most `timeoutMs` (default 30 s), until
   * it has rejoined as a replica with its replication link up and the cluster is healthy. A killed master comes back
   * as a replica of the one that replaced it.
   */
  restart(node: ClusterNode, timeoutMs?: number): Promise<{ ms: number }>;
  /**
   * Moves `slots` slots from `from` to `to` with `redis-cli --cluster reshard` (no prompts), in the background, so
   * the test can keep its load running: resolves once redis-cli is started; await `done` for its end. `pipeline` is how many keys one MIGRATE moves
   * (redis-cli's default is 10); a small one keeps a slot half-migrated longer, which is when ASK redirects happen.
   */
  reshard(options: { from: ClusterNode; to: ClusterNode; slots: number; pipeline?: number; timeoutMs?: number }): Promise<Reshard>;
  /** SIGSTOP: the node keeps its connections and answers nothing (longer than the node timeout means a failover). */
  freeze(node: ClusterNode): void;
  /** SIGCONT after freeze. */
  resume(node: ClusterNode): void;
  /** Waits, at most `timeoutMs` (default 30 s), until healthProblems() finds none. */
  waitUntilHealthy(timeoutMs?: number): Promise<void>;
  /**
   * What keeps the cluster from being healthy, as seen by every answering node: cluster_state not ok, slots not
   * all served, a running node marked failing, views that disagree on who owns a slot, a slot being migrated, a
   * replica whose replication link is down. Empty when healthy.
   */
  healthProblems(): Promise<string[]>;
  /** The end of a node's log (stdout and stderr across restarts). */
  logTail(node: ClusterNode, lines?: number): string;
}

/** One line of CLUSTER NODES. */
interface NodeLine {
  id: string;
  port: number;
  flags: string[];
  masterId: string | undefined;
  linkState: string;
  ranges: [number, number][];
  /** Slots in migration ([slot->-id] or [slot-<-id]). */
  migrating: string[];
}

function parseClusterNodes(text: string): NodeLine[] {
  return text
    .split(/\r?\n/)
    .filter((line) => line.trim() !== "")
    .map((line) => {
      const [id = "", address = "", flags = "", master = "-", , , , linkState = "", ...slots] = line.trim().split(/\s+/);
      const port = Number(/:(\d+)@/.exec(address)?.[1]);
      const ranges: [number, number][] = [];
      const migrating: string[] = [];
      for (const slot of slots) {
        if (slot.startsWith("[")) migrating.push(slot);
        else {
          const [first, last] = slot.split("-").map(Number) as [number, number | undefined];
          ranges.push([first, last ?? first]);
        }
      }
      return { id, port, flags: flags.split(","), masterId: master === "-" ? undefined : master, linkState, ranges, migrating };
    });
}

/** The port of the node with this id in a CLUSTER NODES view (the id itself if the view does not list it). */
const byId = (lines: NodeLine[], id: string): string => String(lines.find((line) => line.id === id)?.port ?? id);

const failing = (line: NodeLine) => line.flags.includes("fail") || line.flags.includes("fail?");

/** Hash slot of a key, as Redis Cluster computes it: CRC16 (XMODEM) of the key or of its {hash tag}, mod 16384. */
export function slotOf(key: string): number {
  const open = key.indexOf("{");
  if (open !== -1) {
    const close = key.indexOf("}", open + 1);
    if (close > open + 1) return crc16(key.slice(open + 1, close)) % CLUSTER_SLOTS;
  }
  return crc16(key) % CLUSTER_SLOTS;
}

/** CRC16-XMODEM (polynomial 0x1021) of each byte value. */
const CRC16_TABLE = Array.from({ length: 256 }, (_, byte) => {
  let crc = byte << 8;
  for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  return crc;
});

/** CRC16-XMODEM of the string's UTF-8 bytes (an ASCII string's char codes are those bytes). */
function crc16(text: string): number {
  let crc = 0;
  for (let i = 0; i < text.length; i++) {
    const byte = text.charCodeAt(i);
    if (byte > 0x7f) return crc16OfBytes(Buffer.from(text));
    crc = ((crc << 8) & 0xffff) ^ (CRC16_TABLE[((crc >> 8) ^ byte) & 0xff] as number);
  }
  return crc;
}

function crc16OfBytes(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) crc = ((crc << 8) & 0xffff) ^ (CRC16_TABLE[((crc >> 8) ^ byte) & 0xff] as number);
  return crc;
}

/** A hash tag for every slot (`{t<n>}`), found once by trying n = 0, 1, 2, … (about 250,000 tries). */
let tagTable: string[] | undefined;

/** A hash tag (`{t<n>}`) whose keys all fall in `slot`: `${label}:${hashTagForSlot(slot)}` is a key in it. */
export function hashTagForSlot(slot: number): string {
  if (!tagTable) {
    const table = new Array<string>(CLUSTER_SLOTS);
    for (let n = 0, found = 0; found < CLUSTER_SLOTS; n++) {
      const at = crc16(`t${n}`) % CLUSTER_SLOTS;
      if (table[at] === undefined) {
        table[at] = `{t${n}}`;
        found++;
      }
    }
    tagTable = table;
  }
  return tagTable[slot] as string;
}

function expand(ranges: readonly (readonly [number, number])[]): number[] {
  const slots: number[] = [];
  for (const [first, last] of ranges) for (let slot = first; slot <= last; slot++) slots.push(slot);
  return slots.sort((a, b) => a - b);
}

/** Starts the cluster; it is stopped on teardown. */
export async function startRedisCluster(t: Teardown, options: RedisClusterOptions = {}): Promise<RedisCluster> {
  const nodeTimeoutMs = options.nodeTimeoutMs ?? 1_500;
  const directory = temporaryDirectory(t, "redis-cluster");
  const clients = new NodeClients();
  const background = new Set<ReturnType<typeof spawn>>();
  let processes: RedisProcess[] = [];
  t.teardown(async () => {
    // Connections first: to a server that is already gone, ioredis's disconnect waits 2 s before it lets go.
    clients.close();
    for (const child of background) child.kill("SIGKILL");
    await Promise.all(processes.map((instance) => instance.kill()));
  });

  processes = await startOnFreePorts(6, BUS_PORT_OFFSET, clients, (ports) =>
    ports.map((port) => {
      const home = join(directory, String(port));
      mkdirSync(home, { recursive: true });
      return new RedisProcess(`cluster node ${LOOPBACK}:${port}`, port, [
        "--port",
        String(port),
        "--bind",
        LOOPBACK,
        "--dir",
        home,
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        join(home, "nodes.conf"),
        "--cluster-node-timeout",
        String(nodeTimeoutMs),
        // A replica takes over however long its link was down, so every master kill ends in a failover.
        "--cluster-replica-validity-factor",
        "0",
        "--save",
        "",
        "--appendonly",
        "no",
        // A (re)joining replica syncs at once instead of after the default 5 s diskless-sync delay.
        "--repl-diskless-sync-delay",
        "0",
      ]);
    }),
  );
  const byPort = new Map(processes.map((instance) => [instance.port, instance]));
  const processOf = (node: { port: number }): RedisProcess => {
    const instance = byPort.get(node.port);
    if (!instance) throw new Error(`no node of this cluster on port ${node.port}`);
    return instance;
  };

  const logTails = (lines = 12) =>
    processes
      .map(
        (instance) =>
          `--- ${instance.name}${instance.running ? "" : " (not running)"}${instance.frozen ? " (frozen)" : ""}:\n${instance.logTail(lines)}`,
      )
      .join("\n");

  const create = await runRedisCli(
    ["--cluster", "create", ...processes.map((instance) => `${LOOPBACK}:${instance.port}`), "--cluster-replicas", "1", "--cluster-yes"],
    options.startTimeoutMs ?? 30_000,
    background,
  );
  if (create.code !== 0) throw new Error(`redis-cli --cluster create failed (exit ${create.code}):\n${create.output}\n${logTails()}`);

  const ids = new Map<number, string>();
  for (const instance of processes) ids.set(instance.port, String(await clients.call(instance.port, "CLUSTER", "MYID")));
  const nodes: ClusterNode[] = processes.map((instance) => ({
    port: instance.port,
    url: instance.url,
    id: ids.get(instance.port) as string,
  }));
  const nodeById = new Map(nodes.map((node) => [node.id, node]));
  const asNode = (node: { id: string; port: number }): ClusterNode =>
    nodeById.get(node.id) ?? { port: node.port, url: `redis://${LOOPBACK}:${node.port}`, id: node.id };

  const answering = () => processes.filter((instance) => instance.answering);

  const view = async (port: number): Promise<NodeLine[]> => parseClusterNodes(String(await clients.call(port, "CLUSTER", "NODES")));

  const topologyFrom = (lines: NodeLine[]): ClusterTopology => {
    const masters = lines
      .filter((line) => line.flags.includes("master") && !failing(line) && line.ranges.length > 0)
      .sort((a, b) => (a.ranges[0]?.[0] ?? 0) - (b.ranges[0]?.[0] ?? 0))
      .map((line) => ({
        ...asNode(line),
        slots: line.ranges,
        replicas: lines.filter((other) => other.masterId === line.id && !failing(other)).map(asNode),
      }));
    const replicas = lines.filter((line) => line.flags.includes("slave") && !failing(line)).map(asNode);
    return { masters, replicas };
  };

  const topology = async (): Promise<ClusterTopology> => {
    let lastError: unknown = new Error("no node of the cluster is answering");
    for (const instance of answering()) {
      try {
        return topologyFrom(await view(instance.port));
      } catch (error) {
        lastError = error;
      }
    }
    throw lastError;
  };

  const masterOf = async (slot: number): Promise<ClusterMaster> => {
    const master = (await topology()).masters.find((candidate) => candidate.slots.some(([first, last]) => slot >= first && slot <= last));
    if (!master) throw new Error(`no master owns slot ${slot}`);
    return master;
  };

  const healthProblems = async (): Promise<string[]> => {
    const problems: string[] = [];
    let reference: string | undefined;
    for (const instance of answering()) {
      const at = `${LOOPBACK}:${instance.port}`;
      try {
        const info = parseFields(String(await clients.call(instance.port, "CLUSTER", "INFO")));
        if (info.get("cluster_state") !== "ok") problems.push(`${at}: cluster_state ${info.get("cluster_state")}`);
        if (info.get("cluster_slots_ok") !== String(CLUSTER_SLOTS)) problems.push(`${at}: ${info.get("cluster_slots_ok")} slots ok`);
        if (info.get("cluster_known_nodes") !== String(processes.length))
          problems.push(`${at}: knows ${info.get("cluster_known_nodes")} nodes`);
        const lines = await view(instance.port);
        for (const line of lines) {
          const other = byPort.get(line.port);
          if (other?.running && failing(line)) problems.push(`${at}: sees running node ${line.port} as ${line.flags.join(",")}`);
          if (line.migrating.length > 0) problems.push(`${at}: slots in migration at ${line.port}: ${line.migrating.join(" ")}`);
        }
        // Who owns which slots and who replicates whom, as this node sees it: every answering node must agree.
        const roles = lines
          .filter((line) => !failing(line))
          .map((line) => {
            if (line.masterId) return `${line.port}:replica-of-${byId(lines, line.masterId)}`;
            return `${line.port}:${line.ranges.map(([a, b]) => `${a}-${b}`).join(",") || "no-slots"}`;
          })
          .sort()
          .join(" ");
        if (reference === undefined) reference = roles;
        else if (roles !== reference) problems.push(`${at}: sees ${roles}, another node ${reference}`);
        const replication = await clients.info(instance.port, "replication");
        if (replication.get("role") === "slave" && replication.get("master_link_status") !== "up")
          problems.push(`${at}: replica link ${replication.get("master_link_status")}`);
      } catch (error) {
        problems.push(`${at}: ${(error as Error).message}`);
      }
    }
    if (reference === undefined) problems.push("no node answers");
    return problems;
  };

  const diagnostics = async (): Promise<string> => {
    let views = "";
    for (const instance of answering()) {
      try {
        views += `--- CLUSTER NODES at ${instance.port}:\n${String(await clients.call(instance.port, "CLUSTER", "NODES")).trim()}\n`;
        break;
      } catch {
        // Try the next node.
      }
    }
    return `${views}${logTails()}`;
  };

  const waitUntilHealthy = (timeoutMs = 30_000) => waitUntilNoProblems("the cluster is healthy", timeoutMs, healthProblems, diagnostics);

  // redis-cli returns once the node it checks with has the full picture; the others learn it by gossip.
  await waitFor(
    "the cluster is healthy with 3 masters, each with a replica",
    options.startTimeoutMs ?? 30_000,
    async (because) => {
      const problems = await healthProblems();
      const formed = await topology();
      if (formed.masters.length !== 3 || formed.masters.some((master) => master.replicas.length !== 1))
        problems.push(`${formed.masters.length} masters with ${formed.replicas.length} replicas`);
      if (problems.length > 0) because(problems.join("; "));
      return problems.length === 0 ? true : undefined;
    },
    async () => `${create.output}\n${await diagnostics()}`,
  );

  const killMaster = async (master?: ClusterNode, timeoutMs = 30_000) => {
    const before = await topology();
    const target = master ? before.masters.find((candidate) => candidate.id === master.id) : before.masters[0];
    if (!target) throw new Error(`${master?.url} is not a master now`);
    if (target.replicas.length === 0) throw new Error(`${target.url} has no replica to take over`);
    const replicaIds = new Set(target.replicas.map((replica) => replica.id));
    const started = Date.now();
    await processOf(target).kill();
    const promoted = await waitFor(
      `a replica of ${target.url} has taken its slots and the cluster is healthy`,
      timeoutMs,
      async (because) => {
        const problems = await healthProblems();
        if (problems.length > 0) {
          because(problems.join("; "));
          return undefined;
        }
        const now = await topology();
        const successor = now.masters.find((candidate) => replicaIds.has(candidate.id));
        if (!successor) because("no former replica is a master yet");
        return successor;
      },
      diagnostics,
    );
    return { killed: asNode(target), promoted: asNode(promoted), ms: Date.now() - started };
  };

  const restart = async (node: ClusterNode, timeoutMs = 30_000) => {
    const instance = processOf(node);
    const started = Date.now();
    await instance.start(clients);
    await waitFor(
      `${node.url} has rejoined as a replica and the cluster is healthy`,
      timeoutMs,
      async (because) => {
        const replication = await clients.info(node.port, "replication");
        if (replication.get("role") !== "slave" || replication.get("master_link_status") !== "up") {
          because(`${node.url}: role ${replication.get("role")}, link ${replication.get("master_link_status")}`);
          return undefined;
        }
        const problems = await healthProblems();
        if (problems.length > 0) because(problems.join("; "));
        return problems.length === 0 ? true : undefined;
      },
      diagnostics,
    );
    return { ms: Date.now() - started };
  };

  const reshard = async (request: {
    from: ClusterNode;
    to: ClusterNode;
    slots: number;
    pipeline?: number;
    timeoutMs?: number;
  }): Promise<Reshard> => {
    const source = (await topology()).masters.find((master) => master.id === request.from.id);
    if (!source) throw new Error(`${request.from.url} is not a master with slots`);
    // What redis-cli does with one source: it moves the source's lowest slots, as many as asked for.
    const slots = expand(source.slots).slice(0, request.slots);
    const timeoutMs = request.timeoutMs ?? 60_000;
    const started = Date.now();
    const cli = runRedisCli(
      [
        "--cluster",
        "reshard",
        `${LOOPBACK}:${request.to.port}`,
        "--cluster-from",
        request.from.id,
        "--cluster-to",
        request.to.id,
        "--cluster-slots",
        String(request.slots),
        "--cluster-pipeline",
        String(request.pipeline ?? 10),
        "--cluster-yes",
      ],
      timeoutMs,
      background,
    );
    const done = cli.then(async (result) => {
      if (result.code !== 0)
        throw new Error(`redis-cli --cluster reshard failed (exit ${result.code}):\n${result.output}\n${await diagnostics()}`);
      await waitFor(
        `every node agrees that ${request.to.url} owns the resharded slots`,
        Math.max(1_000, timeoutMs - (Date.now() - started)),
        async (because) => {
          for (const instance of answering()) {
            const owner = (await view(instance.port)).find((line) => line.id === request.to.id);
            const owned = new Set(expand(owner?.ranges ?? []));
            const missing = slots.filter((slot) => !owned.has(slot));
            if (missing.length > 0) {
              because(`${instance.port} does not see slots ${missing.slice(0, 5).join(",")} at ${request.to.port} yet`);
              return undefined;
            }
          }
          return true;
        },
        diagnostics,
      );
      return { ms: Date.now() - started, output: result.output };
    });
    // A test that never awaits `done` must not die of an unhandled rejection; one that awaits it still sees it.
    done.catch(() => {});
    return { slots, done };
  };

  return {
    nodes,
    urls: nodes.map((node) => node.url),
    nodeTimeoutMs,
    topology,
    masterOf,
    killMaster,
    kill: (node) => processOf(node).kill(),
    restart,
    reshard,
    freeze: (node) => processOf(node).freeze(),
    resume: (node) => processOf(node).resume(),
    waitUntilHealthy,
    healthProblems,
    logTail: (node, lines) => processOf(node).logTail(lines),
  };
}

/** Runs redis-cli to its end (killed after `timeoutMs`) and returns its exit code and output. */
function runRedisCli(
  args: string[],
  timeoutMs: number,
  background: Set<ReturnType<typeof spawn>>,
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn("redis-cli", args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, TERM: "dumb" } });
    trackChild(child);
    background.add(child);
    let output = "";
    const append = (chunk: Buffer) => (output += chunk.toString());
    child.stdout?.on("data", append);
    child.stderr?.on("data", append);
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`redis-cli ${args.slice(0, 2).join(" ")} did not finish within ${timeoutMs} ms:\n${output}`));
    }, timeoutMs);
    child.once("error", (error) => {
      clearTimeout(timer);
      background.delete(child);
      reject(new Error(`redis-cli could not be started: ${error.message}`));
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      background.delete(child);
      // redis-cli colours its cluster output; the escapes only get in the way of reading it in a failure message.
      // biome-ignore lint/suspicious/noControlCharactersInRegex: the ANSI escape character is what this removes
      resolve({ code, output: output.replace(/\u001b\[[0-9;]*m/g, "") });
    });
  });
}
