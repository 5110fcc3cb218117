import type { FastifyInstance, LightMyRequestResponse } from "fastify";
import type { AnalyticsRuntime } from "../../src/analytics/index.js";
import { buildApp } from "../../src/app.js";
import { validateConfig } from "../../src/config/load.js";
import type { KeygateConfig } from "../../src/config/schema.js";
import type { NoticeSink } from "../../src/domain/notices.js";
import type { Clock } from "../../src/lib/clock.js";
import { defined } from "../../src/lib/defined.js";
import { REDIS_URL, uniquePrefix } from "./redis.js";

export type StorageKind = "memory" | "redis";
export const STORAGE_KINDS: readonly StorageKind[] = ["memory", "redis"];

/** The workspace of the harness's all-powerful root key, and a second one for isolation tests. */
export const WORKSPACE = "ws_test";
export const OTHER_WORKSPACE = "ws_other";
export const ROOT_KEY = "root_test_everything_allowed";
export const OTHER_ROOT_KEY = "root_test_other_workspace";
/** `gateway.apiRoutes.allowedUpstreams` letting routes made through the API reach the tests' upstreams. */
export const LOOPBACK_UPSTREAMS = ["127.0.0.0/8", "::1"];

interface TapLike {
  teardown(fn: () => unknown): void;
}

export interface HarnessOptions {
  storage?: StorageKind;
  clock?: Clock;
  /** Extra raw configuration merged over the harness's own (validated like a file). */
  config?: Record<string, unknown>;
  /** An analytics runtime opened by the test (which closes it) instead of the configured one. */
  analytics?: AnalyticsRuntime;
  /** Log lines go here (at the configured `logging.level`); without it the app logs nothing. */
  log?: { write(line: string): void };
  /** Where the services post notices (credit crossings). */
  notices?: NoticeSink;
}

export interface CallResult {
  status: number;
  headers: LightMyRequestResponse["headers"];
  body: any;
}

export interface Harness {
  app: FastifyInstance;
  config: KeygateConfig;
  /** POST /v2/<procedure> with the harness root key (or `rootKey`; null sends no Authorization header). */
  call(procedure: string, body: unknown, options?: { rootKey?: string | null; headers?: Record<string, string> }): Promise<CallResult>;
  /** A stored root key of `workspace` holding exactly `permissions`. */
  rootKey(permissions: string[], workspace?: string): Promise<string>;
}

/** An app on in-memory or Redis stores (unique prefix, cleaned up), closed when the test ends. */
export async function harness(t: TapLike, options: HarnessOptions = {}): Promise<Harness> {
  const storage = options.storage ?? "memory";
  const raw: Record<string, unknown> = {
    rootKeys: [
      { key: ROOT_KEY, workspaceId: WORKSPACE, permissions: ["*"] },
      { key: OTHER_ROOT_KEY, workspaceId: OTHER_WORKSPACE, permissions: ["*"] },
    ],
    ...(storage === "redis" ? { storage: { redis: { url: REDIS_URL, prefix: uniquePrefix(t, "app") } } } : {}),
    // Tests that are not about analytics do not open an engine; analytics tests configure one.
    analytics: { engine: "off" },
    ...options.config,
    // The tests' upstreams listen on loopback: routes made through the API may reach them, as an operator's list lets
    // a sidecar's through. Tests of that guard give their own `gateway.apiRoutes`.
    gateway: { apiRoutes: { allowedUpstreams: LOOPBACK_UPSTREAMS }, ...(options.config?.gateway as object | undefined) },
  };
  const config = validateConfig(raw, "test harness");
  const logging = options.log ? { logStream: options.log } : { logger: false };
  const app = await buildApp(config, {
    ...logging,
    ...defined({ clock: options.clock, analytics: options.analytics, notices: options.notices }),
  });
  t.teardown(() => app.close());

  return {
    app,
    config,
    async call(procedure, body, callOptions = {}) {
      const rootKey = callOptions.rootKey === undefined ? ROOT_KEY : callOptions.rootKey;
      const response = await app.inject({
        method: "POST",
        url: `/v2/${procedure}`,
        headers: {
          "content-type": "application/json",
          ...(rootKey === null ? {} : { authorization: `Bearer ${rootKey}` }),
          ...callOptions.headers,
        },
        payload: JSON.stringify(body),
      });
      return { status: response.statusCode, headers: response.headers, body: response.body === "" ? undefined : response.json() };
    },
    async rootKey(permissions, workspace = WORKSPACE) {
      const { key } = await app.services.rootKeys.create({ workspaceId: workspace, permissions });
      return key;
    },
  };
}
