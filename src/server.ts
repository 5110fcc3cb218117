import type { AddressInfo } from "node:net";
import { buildApp } from "./app.js";
import { ensureBootstrapRootKey } from "./bootstrap.js";
import { ConfigError, configPath, loadConfig } from "./config/load.js";
import { reloadRoutes, watchRoutes } from "./gateway/reload.js";
import type { KeygateConfig } from "./config/schema.js";
import { redactUrl } from "./storage/redis/connection.js";

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

  const lines = [
    `keygate is listening on ${address} (configured host ${config.server.host}, port ${config.server.port})`,
    config.storage.redis
      ? `storage: Redis at ${redactUrl(config.storage.redis.url)}, key prefix '${config.storage.redis.prefix}'`
      : "storage: in-memory (everything is lost when keygate stops; set REDIS_URL to keep data in Redis)",
    app.analytics.describe(),
    config.routes.length > 0
      ? `gateway: ${config.routes.map((route) => `${route.name} (${route.match.prefix} -> ${route.upstream})`).join(", ")}`
      : "gateway: no routes (add `routes` to the configuration to put keygate in front of an API)",
  ];
  if (bootstrap) {
    lines.push(
      "",
      `ROOT KEY (workspace ${bootstrap.workspaceId}, every permission). It is shown only this once; keep it safe:`,
      `  ${bootstrap.key}`,
      "",
      // The bound port, not the configured one: port 0 means one the OS picked.
      `Try it:  curl -s -X POST http://localhost:${(app.server.address() as AddressInfo).port}/v2/apis.createApi \\`,
      `           -H "Authorization: Bearer ${bootstrap.key}" -H "Content-Type: application/json" -d '{"name":"my-api"}'`,
    );
  }
  console.log(lines.join("\n"));

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
      () => process.exit(0),
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
