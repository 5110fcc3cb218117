/**
 * keys.verifyKey for a cached key against a bare Fastify route answering a fixed body of the same shape, side by
 * side in one run: once for a key without limits, once with one Redis-backed named limit and credits.
 *
 *   npm run bench:verify -- [--duration 30] [--slice 2] [--connections 50] [--analytics embedded|off]
 *
 * A child process serves both targets on Redis stores; the parent drives the load. See bench/README.md.
 */
import Fastify from "fastify";
import { REDIS_URL, ROOT_KEY, deleteByPrefix, forkServing, interleave, printRatio, printTargets, runOptions, serve, servingRole, startKeygate, type Target } from "./side-by-side.js";

const API_ID = "api_bench_verify";

/** The child: the bare route, and keygate with the two keys created (the warm-up caches them). */
async function startServers() {
  const bare = Fastify({ logger: false });
  const fixed = { meta: { requestId: "req_bench" }, data: { valid: true, code: "VALID", keyId: "key_bench", enabled: true, permissions: [], roles: [] } };
  bare.post("/v2/keys.verifyKey", async () => fixed);
  const bareUrl = await bare.listen({ host: "127.0.0.1", port: 0 });

  const keygate = await startKeygate({ apiId: API_ID });
  const plain = await keygate.call("keys.createKey", { apiId: API_ID });
  const limited = await keygate.call("keys.createKey", {
    apiId: API_ID,
    credits: { remaining: 1_000_000_000_000 },
    ratelimits: [{ name: "requests", limit: 1_000_000, duration: 60_000, autoApply: false }],
  });
  return {
    served: { bare: bareUrl, keygate: keygate.url, prefix: keygate.prefix, plainKey: String(plain.key), limitedKey: String(limited.key), engine: keygate.analytics },
    close: async () => {
      await Promise.all([bare.close(), keygate.close()]);
    },
  };
}

async function drive(): Promise<void> {
  const options = runOptions();
  const child = await forkServing(import.meta.url, "servers");
  const { bare, keygate, prefix, plainKey, limitedKey, engine } = child.served as { bare: string; keygate: string; prefix: string; plainKey: string; limitedKey: string; engine: string };
  const headers = { "content-type": "application/json", authorization: `Bearer ${ROOT_KEY}` };
  const plainBody = JSON.stringify({ key: plainKey });
  const limitedBody = JSON.stringify({ key: limitedKey, ratelimits: [{ name: "requests" }], credits: { cost: 1 } });

  const bareRoute: Target = { label: "bare Fastify route", url: `${bare}/v2/keys.verifyKey`, servedBy: child, method: "POST", headers, body: () => plainBody };
  const verify: Target = { label: "keys.verifyKey, no limits", url: `${keygate}/v2/keys.verifyKey`, servedBy: child, method: "POST", headers, body: () => plainBody };
  const verifyLimited: Target = { label: "keys.verifyKey, named limit + credits", url: verify.url, servedBy: child, method: "POST", headers, body: () => limitedBody };

  console.log(
    `keys.verifyKey (cached key) vs a bare Fastify route: ${options.connections} connections, ${options.duration} s per target in ${options.slice} s slices, interleaved; Redis ${REDIS_URL}; analytics ${engine}`,
  );
  const runs = await interleave([bareRoute, verify, verifyLimited], options);
  printTargets(runs);
  console.log();
  printRatio(runs, verify, bareRoute, 0.7);
  printRatio(runs, verifyLimited, bareRoute, 0.5);

  await child.stop();
  await deleteByPrefix(prefix);
}

if (servingRole()) await serve(startServers);
else await drive();
