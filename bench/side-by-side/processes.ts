/**
 * Every target is served by a child process of its own, so the load generator never shares an event loop with
 * what it measures. The benchmark script forks itself with `--serve <role>`; the child starts its servers, says
 * what it serves, and answers the driver's questions about the CPU time it used.
 */
import { type ChildProcess, fork } from "node:child_process";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";

/** What a serving child reports once it listens (its URLs and whatever else the driver needs). */
export type Served = Record<string, string>;

/** The role this process was forked for (`--serve <role>`), or undefined in the driving process. */
function servingRole(): string | undefined {
  const at = process.argv.indexOf("--serve");
  return at === -1 ? undefined : process.argv[at + 1];
}

/**
 * Starts a role's servers; `served` is what the driver learns of them, `close` stops them. `cpuMicros`, when the
 * servers run in processes of their own, counts their CPU time instead of this process's.
 */
type Start = () => Promise<{ served: Served; close(): Promise<void>; cpuMicros?: () => number }>;

/**
 * The entry point of a benchmark script: in a child forked with `--serve <role>`, serves that role; in the
 * parent, runs `drive`, which forks the children (forkServing) and drives the load.
 */
export async function benchmark(drive: () => Promise<void>, roles: Record<string, Start>): Promise<void> {
  const role = servingRole();
  if (role === undefined) return drive();
  const start = roles[role];
  if (!start) throw new Error(`no role '${role}' in this benchmark (${Object.keys(roles).join(", ")})`);
  await serve(start);
}

/** Messages between the driver and a serving child. */
type ToChild = { type: "cpu" } | { type: "stop" };
type FromChild = { type: "served"; served: Served } | { type: "cpu"; micros: number };

/**
 * In a serving child: starts the servers, reports what `start` returns to the parent, answers the parent's
 * questions about the CPU time it used, and closes the servers when the parent says so or is gone (a driver that
 * failed leaves no server behind).
 */
async function serve(start: Start): Promise<void> {
  const { served, close, cpuMicros } = await start();
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      await close();
      process.exit(0);
    })());
  const send = (message: FromChild) => process.send?.(message);
  send({ type: "served", served });
  process.on("disconnect", stop);
  process.on("message", async (message: ToChild) => {
    if (message.type === "stop") return stop();
    const usage = process.cpuUsage();
    send({ type: "cpu", micros: cpuMicros ? cpuMicros() : usage.user + usage.system });
  });
}

export interface Child {
  served: Served;
  /** CPU time (user + system) the child has used so far, in microseconds. */
  cpuMicros(): Promise<number>;
  stop(): Promise<void>;
}

/** Forks the benchmark script `moduleUrl` as a child serving `role`, and waits until it listens. */
export async function forkServing(moduleUrl: string, role: string): Promise<Child> {
  // The child gets the command line's options too (--analytics is read where keygate starts).
  const child: ChildProcess = fork(fileURLToPath(moduleUrl), ["--serve", role, ...process.argv.slice(2)], { stdio: "inherit" });
  const next = <T extends FromChild["type"]>(type: T) =>
    new Promise<Extract<FromChild, { type: T }>>((resolve, reject) => {
      const onMessage = (message: FromChild) => {
        if (message.type !== type) return;
        child.off("message", onMessage);
        child.off("exit", onExit);
        resolve(message as Extract<FromChild, { type: T }>);
      };
      const onExit = (code: number | null) => reject(new Error(`the ${role} child exited (${code})`));
      child.on("message", onMessage);
      child.once("exit", onExit);
    });
  const { served } = await next("served");
  return {
    served,
    cpuMicros: async () => {
      const answer = next("cpu");
      child.send({ type: "cpu" } satisfies ToChild);
      return (await answer).micros;
    },
    stop: async () => {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.send({ type: "stop" } satisfies ToChild);
      await exited;
    },
  };
}

/** Stops every child, the ones serving proxies before the upstreams behind them (give them in that order). */
export async function stopAll(...children: Child[]): Promise<void> {
  for (const child of children) await child.stop();
}

/** A node:http server answering every request 200 with `body` as JSON, served at `url`: an upstream, or a floor. */
export async function startAnswering(body: string): Promise<{ served: Served; close(): Promise<void> }> {
  const server = createServer((request, response) => {
    request.resume();
    response.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    served: { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
