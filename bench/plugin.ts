/**
 * The Fastify plugin (keygate/fastify): the same GET route of a Fastify app three ways, side by side in one run:
 * bare; protected by the plugin (the key verified in process, on keygate's Redis stores); and protected by a
 * preHandler that calls a keygate server's keys.verifyKey over HTTP through Unkey's SDK (`@unkey/api`).
 *
 *   npm run build:test && node build/bench/plugin.js [--duration 30] [--slice 2] [--connections 50] [--generator autocannon|wrk] [--analytics embedded|off]
 *
 * The keygate server, the bare app, the app with the plugin and the app calling the server each run in a child
 * process; the driver hands the server's URL and Redis prefix to the apps' children in their environment. The key
 * holds `orders.read` and every protected route asks for it. See bench/README.md.
 */
import { Unkey } from "@unkey/api";
import Fastify, { type FastifyReply, type FastifyRequest } from "fastify";
import keygate from "../src/plugin/fastify.js";
import { callKeygate, ROOT_KEY, startKeygate } from "./side-by-side/keygate.js";
import { interleave, type Target } from "./side-by-side/load.js";
import { describeRun, runOptions } from "./side-by-side/options.js";
import { benchmark, forkServing, stopAll } from "./side-by-side/processes.js";
import { deleteByPrefix, REDIS_URL } from "./side-by-side/redis.js";
import { printRatio, printTargets } from "./side-by-side/report.js";

const API_ID = "api_bench_plugin";
const ORDER = { id: 7, status: "shipped", items: 3 };

/** The app's route, answering the same fixed body however it is protected. */
async function serveApp(protect: (app: ReturnType<typeof Fastify>) => Promise<object>) {
  const app = Fastify({ logger: false });
  const routeOptions = await protect(app);
  app.get("/orders/7", routeOptions, async () => ORDER);
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  return { served: { url }, close: () => app.close() };
}

const startBare = () => serveApp(async () => ({}));

const startPlugin = () =>
  serveApp(async (app) => {
    await app.register(keygate, { redis: REDIS_URL, prefix: process.env.KG_BENCH_PREFIX as string });
    return { config: { keygate: { apiId: API_ID, permissions: "orders.read" } } };
  });

/** The SDK-wrapper way: each request's key sent to the keygate server's keys.verifyKey by Unkey's own SDK. */
const startRemote = () =>
  serveApp(async () => {
    const unkey = new Unkey({
      rootKey: process.env.KG_BENCH_ROOT_KEY as string,
      serverURL: process.env.KG_BENCH_SERVER as string,
      retryConfig: { strategy: "none" },
    });
    return {
      preHandler: async (req: FastifyRequest, reply: FastifyReply) => {
        const key = String(req.headers.authorization ?? "").replace(/^Bearer /, "");
        const verified = await unkey.keys.verifyKey({ key, permissions: "orders.read" });
        if (!verified.data.valid) return reply.code(401).send({ error: "unauthorized" });
        return undefined;
      },
    };
  });

async function startServer() {
  const server = await startKeygate({ apiId: API_ID });
  return { served: { url: server.url, prefix: server.prefix, engine: server.analytics }, close: () => server.close() };
}

async function drive(): Promise<void> {
  const options = await runOptions();
  const serverChild = await forkServing(import.meta.url, "server");
  const { url: server, prefix, engine } = serverChild.served as { url: string; prefix: string; engine: string };
  process.env.KG_BENCH_PREFIX = prefix;
  process.env.KG_BENCH_SERVER = server;
  process.env.KG_BENCH_ROOT_KEY = ROOT_KEY;
  const bareChild = await forkServing(import.meta.url, "bare");
  const pluginChild = await forkServing(import.meta.url, "plugin");
  const remoteChild = await forkServing(import.meta.url, "remote");
  const { key } = await callKeygate(server, "keys.createKey", { apiId: API_ID, permissions: ["orders.read"] });
  const headers = { authorization: `Bearer ${String(key)}` };
  const target = (label: string, child: typeof bareChild): Target => ({
    label,
    url: `${child.served.url}/orders/7`,
    servedBy: child,
    method: "GET",
    headers,
  });
  const bare = target("bare Fastify route", bareChild);
  const plugin = target("route with keygate's plugin", pluginChild);
  const remote = target("route calling keys.verifyKey over HTTP", remoteChild);

  console.log(
    describeRun("a Fastify route: bare, with the plugin, calling a keygate server", options, [
      `Redis ${REDIS_URL}`,
      `server analytics ${engine}`,
    ]),
  );
  const runs = await interleave([bare, plugin, remote], options);
  printTargets(runs);
  console.log();
  printRatio(runs, plugin, bare);
  printRatio(runs, plugin, remote);
  console.log("(the CPU of the route calling keys.verifyKey leaves out the keygate server's)");

  await stopAll(bareChild, pluginChild, remoteChild, serverChild);
  await deleteByPrefix(prefix);
}

await benchmark(drive, { bare: startBare, plugin: startPlugin, remote: startRemote, server: startServer });
