import cluster from "node:cluster";
import type { AddressInfo } from "node:net";
import type { FastifyBaseLogger } from "fastify";
import { runPrimary, workerCount } from "./cluster/primary.js";
import { linkToPrimary } from "./cluster/worker.js";
import { FIRST_WORKER_VARIABLE } from "./cluster/worker-pool.js";
import { ConfigError, configPath, loadConfig } from "./config/load.js";
import type { KeygateConfig } from "./config/schema.js";
import { describeCertificate, readTlsFiles } from "./config/tls-files.js";
import { redactUrl } from "./lib/redact-url.js";
import { closeGracefully, logUnhandledRejections, openWork } from "./shutdown.js";

/**
 * Process entry: load the configuration; with one worker, build the app, listen, and close gracefully on
 * SIGINT/SIGTERM within server.shutdownTimeoutMs (shutdown.ts); with several, the primary forks them (cluster/primary.ts) and each worker does the same as one
 * process would, its embedded analytics in the primary.
 */
async function main(): Promise<void> {
  let config: KeygateConfig;
  try {
    config = loadConfig();
    // Checked here, before any worker starts: a file that cannot be used stops keygate with one line naming it.
    if (config.server.tls) readTlsFiles(config.server.tls, { source: configPath() ?? "environment", env: process.env });
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(`keygate: ${error.message}`);
      process.exit(1);
    }
    throw error;
  }

  if (cluster.isPrimary) {
    const count = workerCount(config);
    if (count > 1) return runPrimary(config, count);
  }
  // Imported by a process that serves requests only: the primary of several workers never loads the app.
  const [{ buildApp }, { deliverBootstrapRootKey, ensureBootstrapRootKey }, { recordReload, reloadRoutes, watchRoutes }] =
    await Promise.all([import("./app.js"), import("./bootstrap.js"), import("./config/reload.js")]);
  const worker = cluster.isWorker ? linkToPrimary(config) : undefined;
  // The first worker (or the only process) speaks for keygate at start-up; the others only say they listen.
  const speaks = worker === undefined || process.env[FIRST_WORKER_VARIABLE] === "1";

  const app = await buildApp(config, worker?.options ?? {});
  logUnhandledRejections(app.log, () => app.metrics?.unhandledRejection());
  worker?.serve(app);
  const bootstrap = speaks ? await ensureBootstrapRootKey(app.services) : undefined;
  const address = await app.listen({ host: config.server.host, port: config.server.port });
  // The bound port, not the configured one: port 0 means one the OS picked.
  const port = (app.server.address() as AddressInfo).port;

  // The start-up summary is written whatever logging.level says (unless silent), as JSON lines like the rest;
  // "keygate is listening" comes last (from the primary, when there are several workers). The bootstrap root key
  // never goes there (see deliverBootstrapRootKey).
  const startup = app.log.child({}, { level: config.logging.level === "silent" ? "silent" : "info" });
  if (speaks) await summarise(startup, config, `${app.analytics.describe()}; ${app.analytics.audit.describe()}`);
  if (speaks && app.certificates) {
    const certificate = describeCertificate(app.certificates.certificate);
    startup.info(
      { certificate },
      `tls: HTTPS with HTTP/2 and HTTP/1.1, certificate ${certificate.subject}, serial ${certificate.serialNumber}, valid to ${certificate.validTo}`,
    );
  }
  const delivery = bootstrap
    ? await deliverBootstrapRootKey(app.services, bootstrap, {
        terminal: process.stderr.isTTY === true,
        directory: process.cwd(),
        port,
        log: startup,
      })
    : undefined;
  if (worker) startup.info({ address, port }, "worker listening");
  else
    startup.info(
      { address, host: config.server.host, port },
      `keygate is listening on ${address} (configured host ${config.server.host}, port ${config.server.port})`,
    );
  if (delivery?.to === "terminal") process.stderr.write(delivery.banner);
  worker?.ready(address);

  let running = config;
  const path = configPath();
  const stopWatching = path
    ? watchRoutes({
        path,
        watchFile: config.gateway.watchConfig,
        reload: () =>
          reloadRoutes(
            app.gatewaySnapshot,
            running,
            () => loadConfig(),
            app.log,
            (next, changes) => {
              running = next;
              recordReload(app.services.audit, next, changes);
            },
          ),
      })
    : () => {};

  // SIGHUP reloads the TLS certificate too (a worker's is relayed by the primary); the files' changes are watched by
  // the app itself.
  const certificates = app.certificates;
  const reloadCertificates = () => certificates?.reload();
  if (certificates) process.on("SIGHUP", reloadCertificates);

  // Every request in flight finishes (new ones get 503), then the buffers are written: app.close() does both.
  const work = openWork(app.server);
  const shutdown = closeGracefully({
    timeoutMs: config.server.shutdownTimeoutMs,
    log: app.log,
    pending: () => ({ ...work(), analyticsEventsBuffered: app.analytics.stats().buffered }),
    close: async (why) => {
      stopWatching();
      process.off("SIGHUP", reloadCertificates);
      await app.close();
      await worker?.close();
      app.log.info({ signal: why }, "closed: every request answered, buffered analytics events written, connections released");
    },
  });
  // A worker closes when its primary asks, and when its primary is gone, rather than serve on unsupervised.
  worker?.onCloseRequest(() => shutdown.close());
  if (worker) process.on("disconnect", () => shutdown.close());
}

/** The start-up summary: storage, analytics, routes. */
async function summarise(log: FastifyBaseLogger, config: KeygateConfig, analytics: string): Promise<void> {
  const redis = config.storage.redis;
  // topology.js (and ioredis with it) is loaded with the Redis stores, only when they are configured.
  const target = redis && (await import("./storage/redis/topology.js")).describeTarget(redis);
  log.info(
    redis ? { storage: "redis", redis: target, prefix: redis.prefix } : { storage: "memory" },
    redis ? `storage: ${target}, key prefix '${redis.prefix}'` : memoryStorageLine(config.analytics),
  );
  log.info({ analytics: config.analytics.engine }, analytics);
  log.info(
    { routes: config.routes.map((route) => route.name) },
    config.routes.length > 0
      ? `gateway: ${config.routes.map((route) => `${route.name} (${route.match.prefix} -> ${upstreamText(route.upstream)})`).join(", ")}`
      : "gateway: no routes (add `routes` to the configuration to put keygate in front of an API)",
  );
}

/**
 * What in-memory storage keeps: the records go with the process, but the analytics engine's data (the audit log
 * with it) stays, in its directory or on its server, and so will name records that no longer exist.
 */
function memoryStorageLine(analytics: KeygateConfig["analytics"]): string {
  if (analytics.engine === "off") return "storage: in-memory (everything is lost when keygate stops; set REDIS_URL to keep data in Redis)";
  const kept = analytics.engine === "embedded" ? `in ${analytics.path}` : "on the ClickHouse server";
  return (
    `storage: in-memory (keys, APIs and every other record are lost when keygate stops, while analytics and the audit log stay ${kept} ` +
    "and will name records that no longer exist; set REDIS_URL to keep the records in Redis)"
  );
}

/** A route's upstream in the start-up line: its URL, or its targets' (a pool), credentials masked. */
function upstreamText(upstream: KeygateConfig["routes"][number]["upstream"]): string {
  if (upstream === undefined) return "decision only (forward auth)";
  const urls = typeof upstream === "string" ? [upstream] : upstream.targets.map((target) => target.url);
  return urls.map((url) => (url.includes("@") ? redactUrl(url) : url)).join(" | ");
}

main().catch((error: unknown) => {
  console.error(`keygate: cannot start: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
