import Fastify from "fastify";
import keygate from "../../src/plugin/fastify.js";

// The Fastify plugin as an app on another Node runs it (node-versions.test.ts): one route guarded by keygate on the
// Redis prefix of a keygate server, a request with a key made on that server and one without. Prints what the app
// answered, one JSON line, and exits.

const { REDIS_URL, KEYGATE_PREFIX, KEYGATE_API_ID, KEYGATE_KEY } = process.env;
const app = Fastify({ logger: false });
await app.register(keygate, { redis: { url: REDIS_URL as string, commandTimeoutMs: 10_000 }, prefix: KEYGATE_PREFIX as string });
app.get("/orders", { config: { keygate: { apiId: KEYGATE_API_ID as string } } }, async (request) => ({ keyId: request.keygate?.keyId }));
const allowed = await app.inject({ url: "/orders", headers: { authorization: `Bearer ${KEYGATE_KEY}` } });
const refused = await app.inject({ url: "/orders" });
await app.close();
console.log(
  JSON.stringify({
    node: process.version,
    allowed: { status: allowed.statusCode, body: allowed.json() },
    refused: { status: refused.statusCode, code: refused.json().error.type },
  }),
);
