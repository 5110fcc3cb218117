import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildApp } from "../../src/app.js";
import { validateConfig } from "../../src/config/load.js";
import { analyticsEngineOption, reservationsOption } from "./options.js";
import { REDIS_URL } from "./redis.js";

export const ROOT_KEY = "root_bench_all_permissions";
export const BENCH_WORKSPACE = "ws_bench";

export interface BenchKeygate {
  url: string;
  /** The Redis prefix it writes under (deleteByPrefix removes it afterwards). */
  prefix: string;
  /** The analytics engine it records verifications in. */
  analytics: string;
  close(): Promise<void>;
}

/**
 * keygate as a benchmark runs it: Redis stores (the single Redis, or the Cluster of `clusterNodes`) under a fresh prefix, a root key holding `*`, the given APIs and
 * other settings, analytics as --analytics says (in a temporary directory), listening on a port the OS picks.
 */
export async function startKeygate(settings: { apiId?: string; clusterNodes?: string[] } & Record<string, unknown>): Promise<BenchKeygate> {
  const { apiId, clusterNodes, ...rest } = settings;
  const prefix = `kgbench:${randomBytes(4).toString("hex")}`;
  const dataDir = await mkdtemp(join(tmpdir(), "keygate-bench-"));
  const config = validateConfig({
    storage: { redis: clusterNodes ? { cluster: { nodes: clusterNodes }, prefix } : { url: REDIS_URL, prefix } },
    rootKeys: [{ key: ROOT_KEY, workspaceId: BENCH_WORKSPACE, permissions: ["*"] }],
    apis: apiId === undefined ? [] : [{ id: apiId, name: "bench", workspaceId: BENCH_WORKSPACE }],
    analytics: { engine: analyticsEngineOption(), path: join(dataDir, "analytics") },
    ratelimit: { reservations: reservationsOption() },
    logging: { level: "silent" },
    ...rest,
  });
  const app = await buildApp(config, { logger: false });
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  return {
    url,
    prefix,
    analytics: config.analytics.engine,
    close: async () => {
      await app.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Calls a /v2 procedure of a keygate child over HTTP with the root key, as a client would; throws on anything but
 * 200. The driver creates a benchmark's keys this way rather than the child with app.inject, so that the keygate
 * under load has served real HTTP requests only, like a deployed one.
 */
export async function callKeygate(url: string, procedure: string, body: object): Promise<Record<string, unknown>> {
  const response = await fetch(`${url}/v2/${procedure}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${ROOT_KEY}` },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`${procedure}: ${response.status} ${text}`);
  return (JSON.parse(text) as { data: Record<string, unknown> }).data;
}
