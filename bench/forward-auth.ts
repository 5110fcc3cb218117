/**
 * The forward-auth door against keygate inline on the same route, side by side in one run, in front of the same
 * upstream: keygate inline (it decides and forwards); the door asked directly (it decides, the asker forwards
 * nothing); nginx running the recipe of docs/forward-auth.md in front of the same keygate (nginx asks the door,
 * over keep-alive connections, then forwards to the upstream itself); nginx alone (plain proxy_pass); and a bare
 * node:http server answering 200 (the floor the door is measured against). The route takes the key from
 * `Authorization: Bearer`, evaluates `orders.read OR admin` and applies one Redis-backed named limit.
 *
 *   npm run build:test && node build/bench/forward-auth.js [--duration 30] [--slice 2] [--connections 50] [--generator autocannon|wrk]
 *
 * keygate and the nginx in front of it run in one child, whose CPU is both processes' (so that nginx + keygate
 * is measured as the whole it is); Redis's CPU is added to every target's by the load loop.
 */
import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { nginxConfiguration } from "../test/helpers/proxies.js";
import { callKeygate, startKeygate, treeCpuMicros } from "./side-by-side/keygate.js";
import { interleave, type Target } from "./side-by-side/load.js";
import { nginxInstalled, startNginx } from "./side-by-side/nginx.js";
import { describeRun, reservationsOption, runOptions } from "./side-by-side/options.js";
import { benchmark, forkServing, startAnswering, stopAll } from "./side-by-side/processes.js";
import { deleteByPrefix, REDIS_URL } from "./side-by-side/redis.js";
import { printRatio, printTargets } from "./side-by-side/report.js";

const API_ID = "api_bench_forward_auth";
const DOOR = "/_keygate/auth";

/** keygate with one route to the upstream, and nginx (the recipe, one worker) asking its door in front of it. */
async function startKeygateBehindNginx() {
  const upstream = upstreamUrl();
  const keygate = await startKeygate({
    apiId: API_ID,
    routes: [
      {
        name: "orders",
        match: { prefix: "/orders" },
        upstream,
        apiId: API_ID,
        permissions: "orders.read OR admin",
        ratelimits: [{ name: "requests", cost: 1 }],
      },
    ],
    gateway: { watchConfig: false, trustProxy: "loopback" },
  });
  const directory = await mkdtemp(join(tmpdir(), "keygate-bench-forward-auth-"));
  const port = await freePort();
  const file = join(directory, "nginx.conf");
  await writeFile(file, nginxConfiguration(directory, port, { keygate: new URL(keygate.url).host, api: new URL(upstream).host }));
  const nginx = spawn("nginx", ["-p", directory, "-c", file, "-e", join(directory, "error.log")], { stdio: "inherit" });
  const nginxUrl = `http://127.0.0.1:${port}`;
  for (let attempt = 0; ; attempt++) {
    try {
      await (await fetch(`${nginxUrl}/`)).arrayBuffer();
      break;
    } catch (error) {
      if (attempt >= 100) throw new Error(`nginx did not start: ${(error as Error).message}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  return {
    served: { url: keygate.url, nginx: nginxUrl, prefix: keygate.prefix },
    // This process (keygate) and nginx's master and worker.
    cpuMicros: () => {
      const own = process.cpuUsage();
      return own.user + own.system + treeCpuMicros(nginx.pid as number);
    },
    close: async () => {
      const exited = new Promise((resolve) => nginx.once("exit", resolve));
      nginx.kill("SIGQUIT");
      await exited;
      await keygate.close();
      await rm(directory, { recursive: true, force: true });
    },
  };
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The upstream's URL, handed to the children by the driver. */
function upstreamUrl(): string {
  const url = process.env.BENCH_UPSTREAM;
  if (!url) throw new Error("BENCH_UPSTREAM is not set: the children are started by the driving process");
  return url;
}

async function drive(): Promise<void> {
  if (!nginxInstalled()) throw new Error("this benchmark needs nginx on the PATH (apt-get install nginx)");
  const options = await runOptions();
  const upstreamChild = await forkServing(import.meta.url, "upstream");
  process.env.BENCH_UPSTREAM = upstreamChild.served.url as string;
  const floorChild = await forkServing(import.meta.url, "floor");
  const nginxAloneChild = await forkServing(import.meta.url, "nginx-alone");
  const keygateChild = await forkServing(import.meta.url, "keygate");
  const { url: keygate, nginx, prefix } = keygateChild.served as { url: string; nginx: string; prefix: string };
  const created = await callKeygate(keygate, "keys.createKey", {
    apiId: API_ID,
    permissions: ["orders.read"],
    ratelimits: [{ name: "requests", limit: 1_000_000, duration: 60_000 }],
  });
  const authorization = `Bearer ${String(created.key)}`;

  const floor: Target = { label: "bare node:http answering 200", url: `${floorChild.served.url as string}/`, servedBy: floorChild };
  const inline: Target = { label: "keygate inline", url: `${keygate}/orders/7`, servedBy: keygateChild, headers: { authorization } };
  const door: Target = {
    label: "keygate's door, asked directly",
    url: `${keygate}${DOOR}`,
    servedBy: keygateChild,
    headers: { authorization, "x-original-uri": "/orders/7", "x-original-method": "GET" },
  };
  const behindNginx: Target = {
    label: "nginx + keygate forward auth",
    url: `${nginx}/orders/7`,
    servedBy: keygateChild,
    headers: { authorization },
  };
  const nginxAlone: Target = {
    label: "nginx alone (proxy_pass)",
    url: `${nginxAloneChild.served.url as string}/orders/7`,
    servedBy: nginxAloneChild,
  };

  console.log(
    describeRun("the forward-auth door, and nginx asking it, vs keygate inline", options, [
      `Redis ${REDIS_URL}`,
      "analytics as --analytics says",
      `reservations ${reservationsOption() ? "on" : "off"}`,
    ]),
  );
  const runs = await interleave([floor, inline, door, behindNginx, nginxAlone], options);
  printTargets(runs);
  console.log();
  printRatio(runs, door, floor, 0.8);
  printRatio(runs, door, inline);
  printRatio(runs, behindNginx, inline, 1.5);
  printRatio(runs, behindNginx, nginxAlone);

  await stopAll(keygateChild, nginxAloneChild, floorChild, upstreamChild);
  await deleteByPrefix(prefix);
}

await benchmark(drive, {
  upstream: () => startAnswering(JSON.stringify({ orders: [{ id: 1, total: 42 }] })),
  floor: () => startAnswering(""),
  "nginx-alone": () => startNginx(upstreamUrl()),
  keygate: startKeygateBehindNginx,
});
