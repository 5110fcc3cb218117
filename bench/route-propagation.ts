/**
 * How long a route change written through one keygate instance takes to be served by another on the same Redis,
 * and by every worker of a third run with `--workers n` workers: `--changes` times, keygate.setRoutePolicies on A
 * flips a route between two versions, and each other instance is asked, as fast as it answers, until it serves the
 * new one. The delay of a change runs from the moment the call to A is sent to the answer that first shows it (for
 * the workers: the first of an unbroken run of answers showing it, each on a connection of its own, 2 per worker,
 * so that every worker has answered). The goal: p99 within 1 s.
 *
 *   npm run build:test && node build/bench/route-propagation.js [--changes 100] [--workers 2|0]
 *
 * Every keygate runs as `npm start` does (build/src/server.js, analytics off), in a process of its own; this one
 * writes the changes, asks and runs the upstream.
 */
import { randomBytes } from "node:crypto";
import { Agent, createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { type BenchKeygate, callKeygate, startKeygateWorkers } from "./side-by-side/keygate.js";
import { deleteByPrefix } from "./side-by-side/redis.js";

const API_ID = "api_bench_route_propagation";
/** Give up on a change not served after this long: the instance never took it up. */
const GIVE_UP_MS = 30_000;
const GOAL_P99_MS = 1_000;

type Version = 1 | 2;

function options(): { changes: number; workers: number } {
  const { values } = parseArgs({ options: { changes: { type: "string", default: "100" }, workers: { type: "string", default: "2" } } });
  const changes = Number(values.changes);
  const workers = Number(values.workers);
  if (!Number.isInteger(changes) || changes < 1) throw new Error(`--changes must be a positive integer, not '${values.changes}'`);
  if (!Number.isInteger(workers) || workers < 0) throw new Error(`--workers must be 0 or more, not '${values.workers}'`);
  return { changes, workers };
}

/** Version 1 denies /bench/x by a firewall, version 2 lets it through to the upstream; both want a key. */
function policies(version: Version, apiId: string) {
  const auth = { name: "auth", enabled: true, keyauth: { keyspaces: [apiId] } };
  const denied = version === 1 ? "/bench/x" : "/bench/y";
  return [
    { name: `deny ${denied}`, enabled: true, match: [{ path: { path: { prefix: denied } } }], firewall: { action: "ACTION_DENY" } },
    auth,
  ];
}

/** The version an answer to GET /bench/x shows. */
function versionShown(status: number): Version {
  if (status === 403) return 1;
  if (status === 200) return 2;
  throw new Error(`GET /bench/x answered ${status}: neither version`);
}

/** A plain upstream answering every request 200 with a small body. */
async function startUpstream() {
  const server = createServer((incoming, response) => {
    incoming.resume();
    response.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** GET `path` of `base` with `headers` through `agent` (false: a connection of its own); resolves with the status once the body is read. */
function get(base: string, path: string, headers: Record<string, string>, agent: Agent | false): Promise<number> {
  return new Promise((resolve, reject) => {
    const asked = request(new URL(path, base), { headers, agent }, (response) => {
      response.resume();
      response.on("end", () => resolve(response.statusCode ?? 0));
      response.on("error", reject);
    });
    asked.on("error", reject);
    asked.end();
  });
}

/** An instance asked until it serves a version; `until` resolves with the moment it was seen to (performance.now()). */
interface Observer {
  name: string;
  until(version: Version): Promise<number>;
  close(): void;
}

/**
 * One keygate process asked over one keep-alive connection (one process answers it), or, with `run` > 1, each
 * question on a connection of its own (the workers take new connections in turn): the version is served once `run`
 * answers in a row show it, from the first of them.
 */
function observer(name: string, base: string, headers: Record<string, string>, run: number): Observer {
  const agent = run === 1 ? new Agent({ keepAlive: true, maxSockets: 1 }) : false;
  return {
    name,
    async until(version) {
      const deadline = performance.now() + GIVE_UP_MS;
      let since: number | undefined;
      let inARow = 0;
      while (performance.now() < deadline) {
        const status = await get(base, "/bench/x", headers, agent);
        const at = performance.now();
        if (versionShown(status) !== version) {
          inARow = 0;
          since = undefined;
          continue;
        }
        since ??= at;
        if (++inARow >= run) return since;
      }
      throw new Error(`${name} did not serve version ${version} within ${GIVE_UP_MS} ms`);
    },
    close: () => {
      if (agent) agent.destroy();
    },
  };
}

function sorted(values: readonly number[]): number[] {
  return [...values].sort((a, b) => a - b);
}

/** The nearest-rank percentile `p` of values sorted ascending. */
function percentile(ascending: readonly number[], p: number): number {
  return ascending[Math.max(0, Math.ceil((p / 100) * ascending.length) - 1)] as number;
}

function row(label: string, delays: readonly number[]): string {
  const ascending = sorted(delays);
  const cell = (value: number) => value.toFixed(1).padStart(9);
  return `${label.padEnd(36)}${cell(percentile(ascending, 50))}${cell(percentile(ascending, 99))}${cell(ascending[ascending.length - 1] as number)}`;
}

async function main(): Promise<void> {
  const { changes, workers } = options();
  const upstream = await startUpstream();
  const prefix = `kgbench:${randomBytes(4).toString("hex")}`;
  // Logging stays at info, as startKeygateWorkers sets it: below that a primary of several workers does not write
  // the "keygate is listening" line that tells it started.
  const settings = { apiId: API_ID, prefix, analytics: { engine: "off" } };
  const started: BenchKeygate[] = [];
  const observers: Observer[] = [];
  try {
    const a = await startKeygateWorkers(1, settings);
    started.push(a);
    const b = await startKeygateWorkers(1, settings);
    started.push(b);
    const c = workers > 0 ? await startKeygateWorkers(workers, settings) : undefined;
    if (c) started.push(c);

    const { key } = (await callKeygate(a.url, "keys.createKey", { apiId: API_ID })) as { key: string };
    const headers = { authorization: `Bearer ${key}` };
    await callKeygate(a.url, "keygate.createRoute", {
      name: "bench",
      match: { prefix: "/bench" },
      upstream: upstream.url,
      policies: policies(1, API_ID),
    });
    observers.push(observer("B, one process", b.url, headers, 1));
    if (c) observers.push(observer(`every worker of ${workers}`, c.url, headers, 2 * workers));
    for (const each of observers) await each.until(1);

    const writes: number[] = [];
    const delays = observers.map(() => [] as number[]);
    const afterWrite: number[] = [];
    for (let change = 1; change <= changes; change++) {
      const version: Version = change % 2 === 1 ? 2 : 1;
      const sent = performance.now();
      // Asked from the moment the write is sent: an instance may take the change up before A has answered.
      const seen = observers.map((each) => each.until(version));
      await callKeygate(a.url, "keygate.setRoutePolicies", { route: "bench", policies: policies(version, API_ID) });
      const written = performance.now();
      const at = await Promise.all(seen);
      writes.push(written - sent);
      for (const [index, moment] of at.entries()) delays[index]?.push(moment - sent);
      afterWrite.push((at[0] as number) - written);
    }

    console.log(`route propagation: ${changes} changes written on A (keygate.setRoutePolicies), each instance on one Redis`);
    console.log(`${"delay in ms, from the call to A".padEnd(36)}${"p50".padStart(9)}${"p99".padStart(9)}${"max".padStart(9)}`);
    console.log(row("A's write answered", writes));
    for (const [index, each] of observers.entries()) console.log(row(`${each.name} serves it`, delays[index] ?? []));
    console.log(row("B serves it, from A's answer", afterWrite));
    const p99 = Math.max(...delays.map((each) => percentile(sorted(each), 99)));
    console.log(`goal: p99 within ${GOAL_P99_MS} ms on every instance: ${p99 <= GOAL_P99_MS ? "met" : "NOT met"} (${p99.toFixed(1)} ms)`);
  } finally {
    for (const each of observers) each.close();
    await Promise.all(started.map((each) => each.close()));
    await deleteByPrefix(prefix);
    await upstream.close();
  }
}

await main();
