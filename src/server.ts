import type { AddressInfo } from "node:net";
import { buildApp } from "./app.js";
import { deliverBootstrapRootKey, ensureBootstrapRootKey } from "./bootstrap.js";
import { ConfigError, configPath, loadConfig } from "./config/load.js";
import { reloadRoutes, watchRoutes } from "./config/reload.js";
import type { KeygateConfig } from "./config/schema.js";
import { describeTarget } from "./storage/redis/topology.js";

/** Process entry: load the configuration, build the app, listen, and close gracefully on SIGINT/SIGTERM. */
async function main(): Promise<void> {
  let config: KeygateConfig;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(`keygate: ${error.message}`);
      process.exit(1);
    }
    throw error;
  }

  const app = await buildApp(config);
  const bootstrap = await ensureBootstrapRootKey(app.services);
  const address = await app.listen({ host: config.server.host, port: config.server.port });
  // The bound port, not the configured one: port 0 means one the OS picked.
  const port = (app.server.address() as AddressInfo).port;

  // The start-up summary is written whatever logging.level says (unless silent), as JSON lines like the rest;
  // "keygate is listening" comes last. The bootstrap root key never goes there (see deliverBootstrapRootKey).
  const startup = app.log.child({}, { level: config.logging.level === "silent" ? "silent" : "info" });
  startup.info(
    config.storage.redis
      ? { storage: "redis", redis: describeTarget(config.storage.redis), prefix: config.storage.redis.prefix }
      : { storage: "memory" },
    config.storage.redis
      ? `storage: ${describeTarget(config.storage.redis)}, key prefix '${config.storage.redis.prefix}'`
      : "storage: in-memory (everything is lost when keygate stops; set REDIS_URL to keep data in Redis)",
  );
  startup.info({ analytics: config.analytics.engine }, app.analytics.describe());
  startup.info(
    { routes: config.routes.map((route) => route.name) },
    config.routes.length > 0
      ? `gateway: ${config.routes.map((route) => `${route.name} (${route.match.prefix} -> ${route.upstream})`).join(", ")}`
      : "gateway: no routes (add `routes` to the configuration to put keygate in front of an API)",
  );
  const delivery = bootstrap
    ? await deliverBootstrapRootKey(app.services, bootstrap, {
        terminal: process.stderr.isTTY === true,
        directory: process.cwd(),
        port,
        log: startup,
      })
    : undefined;
  startup.info(
    { address, host: config.server.host, port },
    `keygate is listening on ${address} (configured host ${config.server.host}, port ${config.server.port})`,
  );
  if (delivery?.to === "terminal") process.stderr.write(delivery.banner);

  const path = configPath();
  const stopWatching = path
    ? watchRoutes({
        path,
        watchFile: config.gateway.watchConfig,
        reload: () => reloadRoutes(app.gatewayRoutes, config, () => loadConfig(), app.log),
      })
    : () => {};

  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, "closing: finishing in-flight requests");
    stopWatching();
    app.close().then(
      () => {
        app.log.info({ signal }, "closed: every request answered, buffered analytics events written, connections released");
        process.exit(0);
      },
      (error: unknown) => {
        app.log.error({ err: error }, "error while closing");
        process.exit(1);
      },
    );
  };
  process.on("SIGINT", () => shutdown("SIGINT"));
  process.on("SIGTERM", () => shutdown("SIGTERM"));
}

main().catch((error: unknown) => {
  console.error(`keygate: cannot start: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
