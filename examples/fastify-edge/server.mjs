// A Fastify edge in front of an upstream API: keygate's plugin verifies each request's key in this process (on the
// Redis your keygate servers use), then @fastify/http-proxy forwards what keygate allowed, with who it is.
//
//   npm install --omit=optional /path/to/keygate-0.1.0.tgz fastify @fastify/http-proxy   (packed in a clone: docs/plugin.md)
//   REDIS_URL=redis://127.0.0.1:6379 KEYGATE_API_ID=api_… UPSTREAM=http://127.0.0.1:3000 node server.mjs

import proxy from "@fastify/http-proxy";
import Fastify from "fastify";
import keygate from "keygate/fastify";

/**
 * The edge, not yet listening: every request under /api needs a key of `apiId` holding `permissions` (when given),
 * costs one unit of the key's `requests` limit when it has one, and reaches `upstream` with the key's id and subject.
 */
export async function buildEdge({ redis, prefix, apiId, upstream, permissions, logger = false }) {
  const app = Fastify({ logger });
  await app.register(keygate, { redis, ...(prefix ? { prefix } : {}) });
  const protection = { apiId, ...(permissions ? { permissions } : {}) };
  await app.register(proxy, {
    upstream,
    prefix: "/api",
    rewritePrefix: "/",
    // The proxy's routes are Fastify routes: keygate's preHandler runs before each is forwarded.
    preHandler: app.keygate.preHandler(protection, "api"),
    replyOptions: {
      // The key itself stays at the edge; the upstream learns who called (keygate's principal).
      rewriteRequestHeaders: (request, { authorization: _key, ...headers }) => ({
        ...headers,
        "x-keygate-key-id": request.keygate.keyId,
        "x-keygate-subject": request.keygate.subject,
      }),
    },
  });
  return app;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const app = await buildEdge({
    redis: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
    prefix: process.env.KEYGATE_REDIS_PREFIX,
    apiId: process.env.KEYGATE_API_ID,
    upstream: process.env.UPSTREAM ?? "http://127.0.0.1:3000",
    permissions: process.env.KEYGATE_PERMISSIONS,
    logger: true,
  });
  await app.listen({ port: Number(process.env.PORT ?? 8081), host: process.env.HOST ?? "127.0.0.1" });
}
