import { execFile } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import t from "tap";
import { REDIS_URL } from "../helpers/redis.js";
import { startUpstream } from "../helpers/upstream.js";
import { API, bearer, disabledPropagates, type KeygateModules, pair, sharedExactly, verifiesWithPrincipal } from "../plugin/scenarios.js";

// keygate as a user gets it: `npm pack`, then the tarball installed in an empty directory, once per run (it takes
// tens of seconds), and every scenario run against that one install: the plugin next to a server, the types, the
// binary, the http-proxy example. The tarball is packed from dist/, which `npm ci` builds (prepare).

/**
 * Child processes run as a user's would: without the loader tap adds to every child's NODE_OPTIONS (it breaks
 * tsc's start), emptied by a shell in between, since tap puts it back in whatever environment a spawn is given.
 */
const exec = promisify(execFile);
const run = (file: string, args: string[], options: { cwd: string; maxBuffer?: number }) =>
  exec("/bin/sh", ["-c", 'NODE_OPTIONS= exec "$0" "$@"', file, ...args], options);
const ROOT = fileURLToPath(new URL("../../../", import.meta.url));

/** Every source has its compiled module in dist/, no older than it: otherwise the tarball would not be this code. */
function staleInDist(directory = join(ROOT, "src")): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) return staleInDist(path);
    if (!entry.name.endsWith(".ts")) return [];
    const compiled = join(ROOT, "dist", relative(join(ROOT, "src"), path).replace(/\.ts$/, ".js"));
    return existsSync(compiled) && statSync(compiled).mtimeMs >= statSync(path).mtimeMs ? [] : [relative(ROOT, path)];
  });
}

const stale = staleInDist();
if (stale.length > 0) {
  t.fail(`dist/ does not hold the compiled sources (run npm run build): ${stale.slice(0, 5).join(", ")}`);
} else {
  const directory = mkdtempSync(join(tmpdir(), "keygate-package-"));
  t.teardown(() => rmSync(directory, { recursive: true, force: true }));
  const started = Date.now();
  // --ignore-scripts: prepare would build dist/ again, which staleInDist has just found current.
  const packed = await run("npm", ["pack", "--ignore-scripts", "--silent", "--pack-destination", directory], { cwd: ROOT });
  const tarball = join(directory, packed.stdout.trim().split("\n").pop() as string);
  const proxyVersion = JSON.parse(readFileSync(join(ROOT, "node_modules/@fastify/http-proxy/package.json"), "utf8")).version;
  writeFileSync(join(directory, "package.json"), JSON.stringify({ name: "keygate-consumer", private: true, type: "module" }));
  // From the npm cache. --omit=optional leaves out chDB's 540 MB library: the embedded engine is not used here.
  // keygate's prepare script (build, tap build) must not run here: it would fail, without TypeScript or tap.
  await run(
    "npm",
    ["install", "--prefer-offline", "--no-audit", "--no-fund", "--omit=optional", tarball, `@fastify/http-proxy@${proxyVersion}`],
    { cwd: directory, maxBuffer: 16 * 1024 * 1024 },
  );
  t.comment(`packed and installed in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const installed = join(directory, "node_modules/keygate");

  copyFileSync(join(ROOT, "examples/fastify-edge/server.mjs"), join(directory, "edge.mjs"));
  // Imported from the consumer's directory, so that every name resolves as the consumer's would.
  writeFileSync(
    join(directory, "consumer.mjs"),
    [
      'export { buildApp, validateConfig } from "keygate";',
      'export { default as keygate } from "keygate/fastify";',
      'export { default as Fastify } from "fastify";',
      'export { buildEdge } from "./edge.mjs";',
    ].join("\n"),
  );
  const consumer = await import(pathToFileURL(join(directory, "consumer.mjs")).href);
  const modules: KeygateModules = consumer;

  t.test("the package holds what runs, and nothing else", async (t) => {
    t.same(readdirSync(installed).sort(), ["README.md", "config", "dist", "package.json"]);
    t.notOk(existsSync(join(installed, "src")), "no sources");
    t.notOk(existsSync(join(installed, "test")), "no tests");
    t.notOk(existsSync(join(installed, "bench")), "no benchmarks");
    t.ok(existsSync(join(installed, "dist/dashboard-ui/index.html")), "the dashboard's pages");
    t.ok(existsSync(join(installed, "dist/storage/redis/lua/ratelimit.lua")), "the Redis scripts");
    t.ok(existsSync(join(installed, "dist/plugin/fastify.d.ts")), "declarations");
  });

  t.test("installed with --omit=optional, the app has no chDB, and its node_modules stays small", async (t) => {
    t.notOk(existsSync(join(directory, "node_modules/chdb")), "no chDB (about 540 MB)");
    t.ok(existsSync(join(directory, "node_modules/@clickhouse/client")), "the ClickHouse client is a dependency (about 1 MB)");
    const { stdout } = await run("du", ["-sk", "node_modules"], { cwd: directory });
    const megabytes = Number(stdout.split("\t")[0]) / 1024;
    t.comment(`the app's node_modules (keygate, fastify's deps, @fastify/http-proxy): ${megabytes.toFixed(0)} MB`);
    t.ok(megabytes < 150, `${megabytes.toFixed(0)} MB, under 150 MB`);
  });

  t.test("an app with the plugin never loads chDB or the ClickHouse client, and works without them", async (t) => {
    // Every module the app resolves is written down by a resolve hook (module.register), in the hooks' own thread.
    const loaded = join(directory, "loaded.txt");
    writeFileSync(
      join(directory, "import-hooks.mjs"),
      `import { appendFileSync } from "node:fs";
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  appendFileSync(${JSON.stringify(loaded)}, resolved.url + "\\n");
  return resolved;
}`,
    );
    writeFileSync(
      join(directory, "watch-imports.mjs"),
      'import { register } from "node:module";\nregister("./import-hooks.mjs", import.meta.url);\n',
    );
    const { prefix, createKey } = await pair(t, modules);
    const { key, keyId } = await createKey({});
    writeFileSync(
      join(directory, "plugin-app.mjs"),
      `import Fastify from "fastify";
import keygate from "keygate/fastify";
const app = Fastify();
await app.register(keygate, { redis: { url: ${JSON.stringify(REDIS_URL)}, commandTimeoutMs: 10000 }, prefix: ${JSON.stringify(prefix)} });
app.get("/orders", { config: { keygate: { apiId: ${JSON.stringify(API)} } } }, async (request) => ({ keyId: request.keygate.keyId }));
const answer = await app.inject({ url: "/orders", headers: { authorization: ${JSON.stringify(`Bearer ${key}`)} } });
await app.close();
console.log(answer.statusCode, answer.body);`,
    );
    const app = await run(process.execPath, ["--import", "./watch-imports.mjs", "plugin-app.mjs"], { cwd: directory });
    t.equal(app.stdout.trim(), `200 ${JSON.stringify({ keyId })}`, "the app verified the key");
    const urls = readFileSync(loaded, "utf8").split("\n");
    t.ok(
      urls.some((url) => url.includes("/node_modules/keygate/dist/plugin/fastify.js")),
      "the hook saw the plugin load",
    );
    t.same(
      urls.filter((url) => /\/node_modules\/(chdb|@clickhouse\/client)\/|\/dist\/analytics\/server-engine\.js/.test(url)),
      [],
      "neither chDB nor the ClickHouse client (nor the server engine, which imports it)",
    );
  });

  t.test("the keygate binary runs from the installed package", async (t) => {
    const { stdout } = await run(join(directory, "node_modules/.bin/keygate"), ["--help"], { cwd: directory });
    t.match(stdout, /^usage: keygate <command>/);
  });

  t.test("the options and request.keygate are typed for a TypeScript app", async (t) => {
    writeFileSync(join(directory, "app.ts"), TYPED_APP);
    writeFileSync(
      join(directory, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          module: "NodeNext",
          moduleResolution: "NodeNext",
          target: "ES2023",
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          typeRoots: [join(ROOT, "node_modules/@types")],
          types: ["node"],
        },
        files: ["app.ts"],
      }),
    );
    const checked = await run(join(ROOT, "node_modules/.bin/tsc"), ["-p", "tsconfig.json"], { cwd: directory }).catch((error) => error);
    const problems = checked instanceof Error ? `${checked.message}\n${(checked as { stdout?: string }).stdout ?? ""}` : "";
    t.equal(problems, "", "tsc finds nothing wrong (the @ts-expect-error lines are errors)");
  });

  t.test("a key made on a server verifies in the app, with the principal and keygate's refusals", async (t) => {
    await verifiesWithPrincipal(t, await pair(t, modules));
  });

  t.test("a key disabled on the server is refused in the app", async (t) => {
    await disabledPropagates(t, await pair(t, modules));
  });

  t.test("limits and credits are shared exactly with the server", async (t) => {
    await sharedExactly(t, await pair(t, modules));
  });

  t.test("the @fastify/http-proxy example forwards what keygate allows and refuses the rest", async (t) => {
    const { prefix, createKey } = await pair(t, modules);
    const upstream = await startUpstream(t);
    const edge = await consumer.buildEdge({ redis: REDIS_URL, prefix, apiId: API, upstream: upstream.url, permissions: "orders.read" });
    t.teardown(() => edge.close());
    const { key, keyId } = await createKey({ permissions: ["orders.read"], externalId: "customer_7" });

    const forwarded = await edge.inject({ url: "/api/orders/42?x=1", headers: bearer(key) });
    t.equal(forwarded.statusCode, 200);
    t.equal(upstream.seen.length, 1);
    const seen = upstream.seen[0];
    t.equal(seen?.url, "/orders/42?x=1");
    t.equal(seen?.headers["x-keygate-key-id"], keyId);
    t.equal(seen?.headers["x-keygate-subject"], "customer_7");
    t.notOk(seen?.headers.authorization, "the key stays at the edge");

    const missing = await edge.inject({ url: "/api/orders/42" });
    t.equal(missing.statusCode, 401);
    t.equal(missing.headers["www-authenticate"], 'Bearer realm="api"');
    t.match(missing.json(), { meta: { requestId: String }, error: { status: 401 } });
    const weak = await createKey({ permissions: ["billing.read"] });
    t.equal((await edge.inject({ url: "/api/orders/42", headers: bearer(weak.key) })).statusCode, 403);
    t.equal(upstream.seen.length, 1, "nothing refused reached the upstream");
  });
}

const TYPED_APP = `import Fastify from "fastify";
import keygate, { type KeygatePrincipal, type KeygateRouteOptions } from "keygate/fastify";
import { buildApp, validateConfig } from "keygate";

const app = Fastify();
await app.register(keygate, { redis: { sentinel: { name: "main", sentinels: ["redis://127.0.0.1:26379"] } }, prefix: "kg" });
app.get("/", { config: { keygate: { apiId: "api_1", permissions: "a.read", credits: { cost: 1 } } } }, async (request) => {
  const principal: KeygatePrincipal | null = request.keygate;
  const keyId: string | undefined = request.keygate?.keyId;
  const credits: number | undefined = request.keygate?.credits;
  const meta: Record<string, unknown> | undefined = request.keygate?.meta;
  return { principal, keyId, credits, meta };
});
// @ts-expect-error a route's options name the API
app.get("/bad", { config: { keygate: { permissions: "a.read" } } }, async () => "");
// @ts-expect-error the Redis is required
await app.register(keygate, { prefix: "kg" });
const protection: KeygateRouteOptions = { apiId: "api_1", key: { header: "x-api-key" }, ratelimits: [{ name: "requests" }] };
app.get("/factory", { preHandler: app.keygate.preHandler(protection) }, async () => "");
const server = await buildApp(validateConfig({ analytics: { engine: "off" } }));
await server.close();
`;
