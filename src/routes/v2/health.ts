import type { FastifyInstance } from "fastify";
import type { AnalyticsRuntime } from "../../analytics/index.js";
import type { Stores } from "../../storage/interfaces.js";

export interface HealthOptions {
  stores: Stores;
  analytics: AnalyticsRuntime;
}

/** How long readiness waits for each dependency; a probe must answer well within its own timeout. */
const CHECK_TIMEOUT_MS = 1_000;

/**
 * Liveness (the process answers) and readiness (it can serve: Redis answers and its breaker is closed, the
 * analytics engine is open). Neither needs a root key; readiness names what is wrong, never a secret.
 */
export async function healthRoutes(app: FastifyInstance, options: HealthOptions): Promise<void> {
  app.get("/v2/liveness", async (request) => ({ meta: { requestId: request.id }, data: { message: "we're cooking" } }));
  app.get("/v2/readiness", async (request, reply) => {
    const checks = await readiness(options);
    const reasons = Object.entries(checks).flatMap(([name, problem]) => (problem === "ok" ? [] : [`${name}: ${problem}`]));
    return reply
      .code(reasons.length === 0 ? 200 : 503)
      .send({ meta: { requestId: request.id }, data: { ready: reasons.length === 0, checks, reasons } });
  });
}

/** Each dependency's state: "ok", or what is wrong with it. */
async function readiness({ stores, analytics }: HealthOptions): Promise<Record<string, string>> {
  const [redis, analyticsState] = await Promise.all([
    stores.health.state === "open"
      ? "the circuit breaker is open: Redis stopped answering and calls fail fast until a probe succeeds"
      : settle(stores.health.check(), "does not answer"),
    settle(analytics.check(), "the engine is not available"),
  ]);
  return { redis, analytics: analyticsState };
}

async function settle(check: Promise<void>, failure: string): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<string>((resolve) => {
    timer = setTimeout(() => resolve(`${failure} (no answer within ${CHECK_TIMEOUT_MS} ms)`), CHECK_TIMEOUT_MS);
  });
  try {
    return await Promise.race([
      check.then(
        () => "ok",
        (error: unknown) => `${failure} (${error instanceof Error ? error.message : String(error)})`,
      ),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
