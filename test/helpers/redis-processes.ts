import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { onExit } from "signal-exit";
import { freePorts, LOOPBACK } from "./ports.js";
import { waitFor } from "./wait.js";

/**
 * What redis-cluster.ts and redis-sentinel.ts share: redis-server processes of a test's own (started on ports
 * the OS handed out, killed by PID), a temporary directory, and connections to look at each server.
 */

export interface Teardown {
  teardown(fn: () => unknown): void;
}

/** Every child process a helper started and has not seen exit yet: killed if this process ends before teardown. */
const children = new Set<ChildProcess>();
/** Temporary directories not removed yet: removed then too. */
const directories = new Set<string>();
let exitHookInstalled = false;

/** Makes an abrupt end of the test process (exit, SIGTERM, tap's timeout) still kill children and remove directories. */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  onExit(() => {
    for (const running of children) {
      try {
        running.kill("SIGCONT");
        running.kill("SIGKILL");
      } catch {
        // Already gone.
      }
    }
    for (const path of directories) rmSync(path, { recursive: true, force: true });
  });
}

/** Remembers a child until it exits, so that it is killed if the test process ends first. */
export function trackChild(child: ChildProcess): void {
  installExitHook();
  children.add(child);
  child.once("exit", () => children.delete(child));
}

/** A directory under the OS's temporary directory, removed on teardown (or when the test process ends first). */
export function temporaryDirectory(t: Teardown, label: string): string {
  installExitHook();
  const path = mkdtempSync(join(tmpdir(), `keygate-${label}-`));
  directories.add(path);
  t.teardown(() => {
    rmSync(path, { recursive: true, force: true });
    directories.delete(path);
  });
  return path;
}

/** The last `lines` lines of `text`. */
function tail(text: string, lines: number): string {
  return text
    .split("\n")
    .slice(-lines - 1)
    .join("\n");
}

/**
 * One redis-server (data node or sentinel) on a fixed port: it can be started again after a kill with the same
 * arguments, so it keeps its identity (a cluster node its nodes.conf, a sentinel its config file).
 */
export class RedisProcess {
  readonly name: string;
  readonly port: number;
  readonly url: string;
  private readonly args: string[];
  private child: ChildProcess | undefined;
  private output = "";
  private isFrozen = false;

  constructor(name: string, port: number, args: string[]) {
    this.name = name;
    this.port = port;
    this.url = `redis://${LOOPBACK}:${port}`;
    this.args = args;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  get frozen(): boolean {
    return this.isFrozen;
  }

  /** Running and not frozen: it can answer. */
  get answering(): boolean {
    return this.running && !this.isFrozen;
  }

  get pid(): number | undefined {
    return this.running ? this.child?.pid : undefined;
  }

  /** The end of the server's log (its stdout and stderr, across restarts), for failure messages. */
  logTail(lines = 25): string {
    return tail(this.output, lines);
  }

  /**
   * Spawns the server and waits until it answers on its port, at most `timeoutMs`. Rejects, naming the server and
   * showing its log tail, when it exits first (a port taken meanwhile, a bad option) or does not answer in time.
   */
  async start(clients: NodeClients, timeoutMs = 10_000): Promise<void> {
    if (this.running) throw new Error(`${this.name} is running already`);
    const child = spawn("redis-server", this.args, { stdio: ["ignore", "pipe", "pipe"] });
    this.child = child;
    this.isFrozen = false;
    trackChild(child);
    const append = (chunk: Buffer) => {
      this.output = tail(this.output + chunk.toString(), 400);
    };
    child.stdout?.on("data", append);
    child.stderr?.on("data", append);
    let spawnError: Error | undefined;
    let closed = false;
    child.once("error", (error) => (spawnError = error));
    child.once("close", () => (closed = true));
    const gone = () => spawnError !== undefined || child.exitCode !== null || child.signalCode !== null;
    let answered: boolean;
    try {
      answered = await waitFor(
        `${this.name} answers`,
        timeoutMs,
        async () => {
          if (gone()) return false;
          // The port was free a moment ago; the process id proves that the server answering on it is this one.
          const info = await clients.info(this.port, "server");
          return info.get("process_id") === String(child.pid) ? true : undefined;
        },
        async () => this.logTail(),
      );
    } catch (error) {
      await this.kill();
      throw error;
    }
    if (answered) return;
    if (spawnError) throw new Error(`${this.name} could not be spawned: ${spawnError.message}`);
    // Its last words arrive with the end of its output, which may come after the exit.
    await waitFor(`${this.name}'s output has ended`, 1_000, async () => (closed ? true : undefined)).catch(() => {});
    throw new Error(`${this.name} exited (code ${child.exitCode}, signal ${child.signalCode}) while starting:\n${this.logTail()}`);
  }

  /** SIGKILL (after SIGCONT, so a frozen server dies too); resolves once the process has exited. */
  async kill(): Promise<void> {
    const child = this.child;
    this.isFrozen = false;
    if (!child || child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGCONT");
    child.kill("SIGKILL");
    await exited;
  }

  /** SIGSTOP: connections stay open and nothing is answered, as with a hung server or a long GC-like pause. */
  freeze(): void {
    if (!this.running) throw new Error(`${this.name} is not running`);
    this.child?.kill("SIGSTOP");
    this.isFrozen = true;
  }

  /** SIGCONT: a frozen server goes on and answers everything that waited. */
  resume(): void {
    if (!this.running) throw new Error(`${this.name} is not running`);
    this.child?.kill("SIGCONT");
    this.isFrozen = false;
  }
}

/** One connection per port for looking at servers; each command fails after 1 s instead of hanging. */
export class NodeClients {
  private readonly clients = new Map<number, Redis>();

  private client(port: number): Redis {
    const existing = this.clients.get(port);
    // A connection that has ended (its server was killed) is replaced; it needs no disconnect of its own.
    if (existing && existing.status !== "end" && existing.status !== "close") return existing;
    const redis = new Redis({
      host: LOOPBACK,
      port,
      lazyConnect: true,
      connectTimeout: 1_000,
      commandTimeout: 1_000,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      enableReadyCheck: false,
    });
    redis.on("error", () => {});
    this.clients.set(port, redis);
    return redis;
  }

  /** Sends one command to the server on `port`; rejects when it cannot be reached or does not answer in 1 s. */
  async call(port: number, command: string, ...args: (string | number)[]): Promise<unknown> {
    const redis = this.client(port);
    if (redis.status === "wait") await redis.connect();
    return redis.call(command, ...args);
  }

  /** INFO `section` as a map of its fields. */
  async info(port: number, section: string): Promise<Map<string, string>> {
    const text = String(await this.call(port, "INFO", section));
    return parseFields(text);
  }

  close(): void {
    for (const redis of this.clients.values()) redis.disconnect();
    this.clients.clear();
  }
}

/** `name:value` lines (INFO, CLUSTER INFO) as a map. */
export function parseFields(text: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const colon = line.indexOf(":");
    if (colon > 0) fields.set(line.slice(0, colon), line.slice(colon + 1).trim());
  }
  return fields;
}

/**
 * Picks `count` free ports (see freePorts), builds the processes for them and starts them all. When one fails
 * because its port was taken between the check and its start, all are killed and it is tried again on new
 * ports (three attempts); any other failure is thrown as it is.
 */
export async function startOnFreePorts(
  count: number,
  busOffset: number,
  clients: NodeClients,
  build: (ports: number[]) => RedisProcess[],
): Promise<RedisProcess[]> {
  for (let attempt = 1; ; attempt++) {
    const processes = build(await freePorts(count, busOffset));
    const results = await Promise.allSettled(processes.map((instance) => instance.start(clients)));
    const failures = results.flatMap((result) => (result.status === "rejected" ? [result.reason as Error] : []));
    if (failures.length === 0) return processes;
    await Promise.all(processes.map((instance) => instance.kill()));
    const portTaken = failures.every((error) => /Address already in use/i.test(error.message));
    if (!portTaken || attempt === 3) throw failures[0];
  }
}
