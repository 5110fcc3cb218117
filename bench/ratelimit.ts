/**
 * ratelimit.limit on Redis against a bare Fastify route, measured side by side in one run.
 *
 *   npm run bench:ratelimit -- [--duration 30] [--slice 2] [--connections 50]
 *
 * A child process serves both targets; the parent drives the load. See bench/README.md.
 */
import Fastify from "fastify";
import { REDIS_URL, ROOT_KEY, deleteByPrefix, forkServing, reservationsOption, interleave, printRatio, printTargets, runOptions, serve, servingRole, startKeygate, type Target } from "./side-by-side.js";

/** The child: a bare route answering a fixed body, and keygate on Redis stores, on ports picked by the OS. */
async function startServers() {
  const bare = Fastify({ logger: false });
  const fixed = { meta: { requestId: "req_bench" }, data: { limit: 1_000_000, remaining: 999_999, reset: 0, success: true } };
  bare.post("/v2/ratelimit.limit", async () => fixed);
  const bareUrl = await bare.listen({ host: "127.0.0.1", port: 0 });
  // ratelimit.limit records no verifications: analytics stays off whatever --analytics says.
  const keygate = await startKeygate({ analytics: { engine: "off" } });
  return {
    served: { bare: bareUrl, keygate: keygate.url, prefix: keygate.prefix },
    close: async () => {
      await Promise.all([bare.close(), keygate.close()]);
    },
  };
}

async function drive(): Promise<void> {
  const options = runOptions();
  const child = await forkServing(import.meta.url, "servers");
  const { bare, keygate, prefix } = child.served as { bare: string; keygate: string; prefix: string };
  const headers = { "content-type": "application/json", authorization: `Bearer ${ROOT_KEY}` };
  // Admitted path: a limit never reached, a new identifier per request (every call is decided on Redis).
  let caller = 0;
  const admitted = () => JSON.stringify({ namespace: "bench", identifier: `caller-${caller++}`, limit: 1_000_000, duration: 60_000 });
  // Denied path: one identifier far over its limit (after the first call, decided by the local fast path).
  const denied = () => JSON.stringify({ namespace: "bench", identifier: "one-caller", limit: 1, duration: 60_000 });

  const bareRoute: Target = { label: "bare Fastify route", url: `${bare}/v2/ratelimit.limit`, servedBy: child, method: "POST", headers, body: admitted };
  const limit: Target = { label: "keygate ratelimit.limit (Redis)", url: `${keygate}/v2/ratelimit.limit`, servedBy: child, method: "POST", headers, body: admitted };
  const deniedLocally: Target = { label: "keygate, denied (local fast path)", url: limit.url, servedBy: child, method: "POST", headers, body: denied };

  console.log(`ratelimit.limit vs a bare Fastify route: ${options.connections} connections, ${options.duration} s per target in ${options.slice} s slices, interleaved; Redis ${REDIS_URL}; reservations ${reservationsOption() ? "on" : "off"}`);
  const runs = await interleave([bareRoute, limit, deniedLocally], options);
  printTargets(runs);
  console.log();
  printRatio(runs, limit, bareRoute, 0.5);
  printRatio(runs, deniedLocally, bareRoute);

  await child.stop();
  await deleteByPrefix(prefix);
}

if (servingRole()) await serve(startServers);
else await drive();
