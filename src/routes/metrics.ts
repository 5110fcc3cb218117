import { createHash, timingSafeEqual } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { KeygateError } from "../errors/keygate-error.js";
import { bearerToken } from "../http/bearer.js";
import type { Metrics } from "../http/metrics.js";

export interface MetricsRouteOptions {
  metrics: Metrics;
  /** metrics.token: when set, a scrape must send `Authorization: Bearer <token>`. */
  token: string | undefined;
  /** The exposition text: this app's series, or every worker's added up. */
  scrape: () => Promise<string>;
}

/** `GET /metrics`: every series in the Prometheus text format (docs/operations.md#metrics). */
export async function metricsRoute(app: FastifyInstance, options: MetricsRouteOptions): Promise<void> {
  const expected = options.token === undefined ? undefined : digest(options.token);
  app.get("/metrics", async (request, reply) => {
    if (expected) {
      const presented = bearerToken(request.headers.authorization);
      const challenge = { headers: { "www-authenticate": 'Bearer realm="metrics"' } };
      if (presented === undefined)
        throw new KeygateError(
          "err:unkey:authentication:missing",
          "GET /metrics needs 'Authorization: Bearer <metrics.token>'.",
          challenge,
        );
      if (!timingSafeEqual(digest(presented), expected))
        throw new KeygateError("err:unkey:authentication:key_not_found", "The metrics token is not valid.", challenge);
    }
    return reply.type(options.metrics.contentType).send(await options.scrape());
  });
}

/** Equal-length digests, so the comparison takes the same time whatever the token sent. */
function digest(token: string): Buffer {
  return createHash("sha256").update(token).digest();
}
