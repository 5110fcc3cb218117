import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./ports.js";

interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface PrivateRedis {
  url: string;
  port: number;
  /** Kills the server (SIGKILL): connections drop and new ones are refused. Its data is gone unless it is persistent. */
  stop(): Promise<void>;
  /** Starts the server on the same port again: empty, or with every write it acknowledged when persistent. */
  start(): Promise<void>;
  /** Freezes the server (SIGSTOP): connections stay open and nothing is answered, like a hung Redis. */
  hang(): void;
  /** Lets a frozen server go on (SIGCONT); it answers everything that waited. */
  resume(): void;
}

export interface PrivateRedisOptions {
  /** Keep every acknowledged write across stop() and start() (an append-only file synced on each write). */
  persistent?: boolean;
  /** Extra redis-server arguments, e.g. ["--requirepass", "secret"]. */
  args?: readonly string[];
  /** The port to listen on (one from ports.ts freePort()); a free one otherwise. */
  port?: number;
}

/**
 * A redis-server of this test's own on a free port, for tests that stop or freeze Redis: the shared Redis other
 * test files use is never touched. Killed on teardown.
 */
export async function privateRedis(t: Teardown, options: PrivateRedisOptions = {}): Promise<PrivateRedis> {
  const port = options.port ?? (await freePort());
  let child: ChildProcess | undefined;
  const persistence = options.persistent
    ? (() => {
        const dir = mkdtempSync(join(tmpdir(), "keygate-redis-"));
        t.teardown(() => rmSync(dir, { recursive: true, force: true }));
        return ["--dir", dir, "--appendonly", "yes", "--appendfsync", "always"];
      })()
    : ["--appendonly", "no"];
  const start = async () => {
    const args = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", ...persistence, ...(options.args ?? [])];
    const started = spawn("redis-server", args, { stdio: ["ignore", "pipe", "pipe"] });
    child = started;
    await new Promise<void>((resolve, reject) => {
      let out = "";
      const timer = setTimeout(() => reject(new Error(`redis-server on port ${port} did not start:\n${out}`)), 10_000);
      started.stdout?.on("data", (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes("Ready to accept connections")) {
          clearTimeout(timer);
          resolve();
        }
      });
      started.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`redis-server on port ${port} exited with ${code}:\n${out}`));
      });
    });
  };
  const stop = async () => {
    const running = child;
    child = undefined;
    if (!running || running.exitCode !== null) return;
    const exited = new Promise((resolve) => running.once("exit", resolve));
    running.kill("SIGCONT");
    running.kill("SIGKILL");
    await exited;
  };
  await start();
  t.teardown(stop);
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    stop,
    start,
    hang: () => child?.kill("SIGSTOP"),
    resume: () => child?.kill("SIGCONT"),
  };
}

/** A TCP server that accepts connections and never answers: what a client sees of a hung Redis. Closed on teardown. */
export async function blackHole(t: Teardown): Promise<{ url: string; connections: () => number }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  let accepted = 0;
  server.on("connection", () => accepted++);
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  );
  return { url: `redis://127.0.0.1:${(server.address() as { port: number }).port}`, connections: () => accepted };
}
