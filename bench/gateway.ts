/**
 * The gateway against a bare @fastify/http-proxy and the Node floor (node:http + undici, no checks), side by side in
 * one run, all in front of the same upstream: the upstream directly, through each, and through keygate with a
 * cached key, a permission query and one Redis-backed named limit. --workers n adds keygate as a server process
 * with one worker and with n. --policies on adds, on the same keygate, a route managed through the API whose four
 * policies do the same and more: a firewall, keyauth, a compound rate limit and CORS (a browser's Origin sent).
 * --pool on adds a route managed through the API with the same checks whose upstream is a pool of two targets. --tls
 * on adds the same keygate with server.tls, loaded over HTTPS/1.1 (the generator) and over HTTP/2 (h2load).
 *
 *   npm run bench:gateway -- [--duration 30] [--slice 2] [--connections 50] [--generator autocannon|wrk] [--analytics embedded|off] [--reservations on|off] [--metrics-cost off|on] [--workers 0|n] [--policies off|on] [--pool off|on] [--tls off|on]
 *
 * Four processes: the upstream, the bare proxy, keygate, and the load generator (this one). See bench/README.md.
 */
import { createServer, type OutgoingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import httpProxy from "@fastify/http-proxy";
import Fastify from "fastify";
import { type Dispatcher, Pool } from "undici";
import { callKeygate, startKeygate, startKeygateWorkers } from "./side-by-side/keygate.js";
import { interleave, type Target } from "./side-by-side/load.js";
import { nginxInstalled, startNginx } from "./side-by-side/nginx.js";
import {
  describeRun,
  metricsCostOption,
  policiesOption,
  reservationsOption,
  runOptions,
  tlsOption,
  workersOption,
} from "./side-by-side/options.js";
import { createPoolRoute, poolOption } from "./side-by-side/pool-route.js";
import { benchmark, forkServing, startAnswering, stopAll } from "./side-by-side/processes.js";
import { deleteByPrefix, REDIS_URL } from "./side-by-side/redis.js";
import { printRatio, printTargets } from "./side-by-side/report.js";
import { BENCH_TLS } from "./side-by-side/tls.js";

const API_ID = "api_bench_gateway";
const POLICIES_ORIGIN = "https://shop.example";

/** The upstream: a plain node:http server answering every request with a small fixed JSON body. */
const startUpstream = () => startAnswering(JSON.stringify({ orders: [{ id: 1, total: 42 }] }));

/** The bare @fastify/http-proxy, in a process of its own. */
async function startBareProxy() {
  const bare = Fastify({ logger: false });
  await bare.register(httpProxy, { upstream: upstreamUrl(), prefix: "/orders", rewritePrefix: "/orders" });
  const url = await bare.listen({ host: "127.0.0.1", port: 0 });
  return { served: { url }, close: () => bare.close() };
}

/**
 * The Node floor: a node:http server that streams every request to the upstream through an undici Pool and the
 * answer back, with no checks at all. What any Node proxy costs at least; keygate's goal is measured against it.
 */
async function startNodeFloor() {
  const upstream = new URL(upstreamUrl());
  const pool = new Pool(upstream.origin, { connections: 128, pipelining: 1, keepAliveTimeout: 60_000 });
  const server = createServer((request, response) => {
    pool
      .stream(
        { path: request.url ?? "/", method: request.method as Dispatcher.HttpMethod, headers: request.headers, body: request },
        ({ statusCode, headers }) => {
          response.writeHead(statusCode, headers as OutgoingHttpHeaders);
          return response;
        },
      )
      .catch(() => {
        if (!response.headersSent) response.writeHead(502);
        response.end();
      });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    served: { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` },
    close: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await pool.close();
    },
  };
}

/** The keygate settings of every keygate target: one route with a key, a permission query and a named limit. */
function keygateSettings(settings: Record<string, unknown> = {}) {
  const upstream = upstreamUrl();
  return {
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
    gateway: { watchConfig: false },
    ...settings,
  };
}

/** keygate with one route, in a process of its own; the driver creates its key over HTTP (the warm-up caches it). */
async function startKeygateWithRoute(settings: Record<string, unknown> = {}) {
  const keygate = await startKeygate(keygateSettings(settings));
  return { served: { url: keygate.url, prefix: keygate.prefix, engine: keygate.analytics }, close: () => keygate.close() };
}

/** keygate as `npm start` runs it, with `workers` workers (server.workers); its CPU is its whole process tree's. */
async function startKeygateServer(workers: number) {
  const keygate = await startKeygateWorkers(workers, keygateSettings());
  return {
    served: { url: keygate.url, prefix: keygate.prefix },
    close: () => keygate.close(),
    cpuMicros: () => keygate.cpuMicros(),
  };
}

/** The upstream's URL, handed to the proxies' processes by the driver. */
function upstreamUrl(): string {
  const url = process.env.BENCH_UPSTREAM;
  if (!url) throw new Error("BENCH_UPSTREAM is not set: the proxies are started by the driving process");
  return url;
}

async function drive(): Promise<void> {
  const options = await runOptions();
  const upstreamChild = await forkServing(import.meta.url, "upstream");
  const { url: upstream } = upstreamChild.served as { url: string };
  process.env.BENCH_UPSTREAM = upstream;
  const bareChild = await forkServing(import.meta.url, "bare-proxy");
  const floorChild = await forkServing(import.meta.url, "node-floor");
  // nginx (one worker) when it is installed: the figure people compare a gateway with.
  const nginxChild = nginxInstalled() ? await forkServing(import.meta.url, "nginx") : undefined;
  const keygateChild = await forkServing(import.meta.url, "keygate");
  const { url: keygate, prefix, engine } = keygateChild.served as { url: string; prefix: string; engine: string };
  const key = await createBenchKey(keygate);

  const direct: Target = { label: "upstream directly", url: `${upstream}/orders/7`, servedBy: upstreamChild };
  const bareProxy: Target = { label: "bare @fastify/http-proxy", url: `${bareChild.served.url as string}/orders/7`, servedBy: bareChild };
  const floor: Target = {
    label: "Node floor (node:http + undici)",
    url: `${floorChild.served.url as string}/orders/7`,
    servedBy: floorChild,
  };
  const nginx: Target | undefined = nginxChild && {
    label: "nginx (1 worker)",
    url: `${nginxChild.served.url as string}/orders/7`,
    servedBy: nginxChild,
  };
  const gateway: Target = {
    label: "keygate (key, permission query, named limit)",
    url: `${keygate}/orders/7`,
    servedBy: keygateChild,
    headers: { authorization: `Bearer ${key}` },
  };

  console.log(
    describeRun("GET through the gateway vs a bare @fastify/http-proxy", options, [
      `Redis ${REDIS_URL}`,
      `analytics ${engine}`,
      `reservations ${reservationsOption() ? "on" : "off"}`,
    ]),
  );
  // --policies: the same checks and more as policies of a route managed through the API, on the same keygate.
  const policies: Target | undefined = policiesOption()
    ? {
        label: "keygate, route: keyauth, compound limit, firewall, CORS",
        url: `${await createPoliciesRoute(keygate)}/orders/7`,
        servedBy: keygateChild,
        headers: { authorization: `Bearer ${key}`, "x-tenant": "acme", origin: POLICIES_ORIGIN },
      }
    : undefined;
  // --pool: the same checks on a route whose upstream is a pool of two targets (a second upstream process).
  const secondChild = poolOption() ? await forkServing(import.meta.url, "upstream") : undefined;
  const pool: Target | undefined = secondChild && {
    label: "keygate, pool of two targets",
    url: `${await createPoolRoute(keygate, API_ID, [upstream, (secondChild.served as { url: string }).url])}/orders/7`,
    servedBy: keygateChild,
    headers: { authorization: `Bearer ${key}` },
  };
  // --metrics-cost: the same keygate with metrics off, to see what counting costs.
  const unmeteredChild = metricsCostOption() ? await forkServing(import.meta.url, "keygate-without-metrics") : undefined;
  const unmetered: Target | undefined = unmeteredChild && {
    label: "keygate, metrics off",
    url: `${unmeteredChild.served.url as string}/orders/7`,
    servedBy: unmeteredChild,
    headers: { authorization: `Bearer ${await createBenchKey(unmeteredChild.served.url as string)}` },
  };
  // --tls: the same keygate with server.tls, over HTTPS/1.1 (the generator, which verifies no certificate) and over
  // HTTP/2 (h2load): one request in flight per connection, as the HTTP/1.1 generators, and ten per connection on a
  // tenth of the connections, as HTTP/2 clients multiplex.
  const tlsChild = tlsOption() ? await forkServing(import.meta.url, "keygate-tls") : undefined;
  const overTls: Target[] = [];
  if (tlsChild) {
    const url = tlsChild.served.url as string;
    const headers = { authorization: `Bearer ${await createBenchKey(url)}` };
    overTls.push(
      { label: "keygate over HTTPS/1.1", url: `${url}/orders/7`, servedBy: tlsChild, headers },
      { label: "keygate over HTTP/2, 1 stream/conn", url: `${url}/orders/7`, servedBy: tlsChild, headers, http2: { streams: 1 } },
      { label: "keygate over HTTP/2, 10 streams/conn", url: `${url}/orders/7`, servedBy: tlsChild, headers, http2: { streams: 10 } },
    );
  }
  // --workers: the same keygate as a server process with one worker and with several, for what workers bring.
  const workers = workersOption();
  const serverChildren =
    workers > 0 ? [await forkServing(import.meta.url, "keygate-1-worker"), await forkServing(import.meta.url, "keygate-n-workers")] : [];
  const servers: Target[] = [];
  for (const [index, child] of serverChildren.entries()) {
    const url = child.served.url as string;
    servers.push({
      label: index === 0 ? "keygate server, 1 worker" : `keygate server, ${workers} workers`,
      url: `${url}/orders/7`,
      servedBy: child,
      headers: { authorization: `Bearer ${await createBenchKey(url)}` },
    });
  }
  const runs = await interleave(
    [
      direct,
      floor,
      ...(nginx ? [nginx] : []),
      bareProxy,
      gateway,
      ...(policies ? [policies] : []),
      ...(pool ? [pool] : []),
      ...(unmetered ? [unmetered] : []),
      ...overTls,
      ...servers,
    ],
    options,
  );
  printTargets(runs);
  console.log();
  printRatio(runs, gateway, bareProxy, 1.2);
  printRatio(runs, gateway, floor, 0.8);
  printRatio(runs, bareProxy, direct);
  if (nginx) printRatio(runs, gateway, nginx);
  if (unmetered) printRatio(runs, gateway, unmetered, 0.97);
  if (policies) printRatio(runs, policies, floor, 0.8);
  if (policies) printRatio(runs, policies, gateway);
  if (pool) printRatio(runs, pool, gateway);
  for (const target of overTls) printRatio(runs, target, gateway);
  if (servers.length === 2) printRatio(runs, servers[1] as Target, servers[0] as Target);

  await stopAll(
    bareChild,
    floorChild,
    ...(nginxChild ? [nginxChild] : []),
    keygateChild,
    ...serverChildren,
    ...(unmeteredChild ? [unmeteredChild] : []),
    ...(secondChild ? [secondChild] : []),
    ...(tlsChild ? [tlsChild] : []),
    upstreamChild,
  );
  await deleteByPrefix(prefix);
  if (unmeteredChild) await deleteByPrefix(unmeteredChild.served.prefix as string);
  if (tlsChild) await deleteByPrefix(tlsChild.served.prefix as string);
  for (const child of serverChildren) await deleteByPrefix(child.served.prefix as string);
}

/**
 * A route managed through the API at /policies, to the same upstream, with the policies a public API puts in front
 * of its upstream: a firewall for a path no request takes, keyauth with the same permission query and named limit, a
 * rate limit by client address and tenant header, and CORS for one origin. Returns the prefix to send requests to.
 */
async function createPoliciesRoute(keygate: string): Promise<string> {
  await callKeygate(keygate, "keygate.createRoute", {
    name: "orders-policies",
    match: { prefix: "/policies" },
    upstream: upstreamUrl(),
    policies: [
      {
        name: "internal",
        enabled: true,
        match: [{ path: { path: { prefix: "/policies/internal/" } } }],
        firewall: { action: "ACTION_DENY" },
      },
      {
        name: "api keys",
        enabled: true,
        keyauth: { keyspaces: [API_ID], permissionQuery: "orders.read OR admin", ratelimits: [{ name: "requests", cost: 1 }] },
      },
      {
        name: "per tenant",
        enabled: true,
        ratelimit: { limit: 1_000_000, windowMs: 60_000, identifiers: [{ remoteIp: {} }, { header: { name: "x-tenant" } }] },
      },
      { name: "browsers", enabled: true, cors: { allowOrigins: [{ exact: POLICIES_ORIGIN }], exposeHeaders: ["x-request-id"] } },
    ],
  });
  return `${keygate}/policies`;
}

/** The key the load uses, made through keygate's API as a client would. */
async function createBenchKey(keygate: string): Promise<string> {
  const created = await callKeygate(keygate, "keys.createKey", {
    apiId: API_ID,
    permissions: ["orders.read"],
    ratelimits: [{ name: "requests", limit: 1_000_000, duration: 60_000 }],
  });
  return String(created.key);
}

await benchmark(drive, {
  upstream: startUpstream,
  "bare-proxy": startBareProxy,
  "node-floor": startNodeFloor,
  nginx: () => startNginx(upstreamUrl()),
  keygate: () => startKeygateWithRoute(),
  "keygate-without-metrics": () => startKeygateWithRoute({ metrics: { enabled: false } }),
  "keygate-tls": () => startKeygateWithRoute({ server: { tls: BENCH_TLS } }),
  "keygate-1-worker": () => startKeygateServer(1),
  "keygate-n-workers": () => startKeygateServer(workersOption()),
});
