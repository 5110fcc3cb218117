import { type Static, Type } from "typebox";
import { GatewaySettingsSchema, RouteSchema } from "../gateway/route-config.js";
import { EXTERNAL_ID_PATTERN, ID_PATTERN, NAME_PATTERN, Strict } from "../http/schemas.js";
import { AnalyticsConfigSchema } from "./analytics-schema.js";
import { DashboardConfigSchema } from "./dashboard-schema.js";
import { DeclaredApiSchema, MigrationSchema, RootKeyConfigSchema } from "./declarations-schema.js";
import { DEFAULTS } from "./defaults.js";
import { EMPTY, HTTP_URL_PATTERN } from "./schema-parts.js";
import { CacheConfigSchema, LoggingConfigSchema, MetricsConfigSchema, ServerConfigSchema } from "./server-schema.js";
import { RatelimitConfigSchema, RedisConfigSchema } from "./storage-schema.js";
import { WebhooksConfigSchema } from "./webhooks-schema.js";

/**
 * The configuration file's schema, one section per field, each section's schema in its own module. Fields with a
 * `default` may be left out of the file; Ajv fills them in (nested objects included), so the static type below is
 * the fully resolved configuration. docs/configuration.md describes every field; a test checks that the example
 * file validates.
 */
export const ConfigSchema = Strict({
  server: ServerConfigSchema,
  logging: LoggingConfigSchema,
  metrics: MetricsConfigSchema,
  /** The in-process caches' memory budget. */
  cache: CacheConfigSchema,
  storage: Strict({ redis: Type.Optional(RedisConfigSchema) }, EMPTY),
  ratelimit: RatelimitConfigSchema,
  errors: Strict({ docsUrl: Type.String({ pattern: HTTP_URL_PATTERN, default: DEFAULTS.docsUrl }) }, EMPTY),
  /** Key-encryption key for recoverable keys: 32 bytes, base64. */
  vault: Strict({ key: Type.Optional(Type.String({ minLength: 1 })) }, EMPTY),
  rootKeys: Type.Array(RootKeyConfigSchema, { default: [] }),
  apis: Type.Array(DeclaredApiSchema, { default: [] }),
  /** Imports from other systems that keys.migrateKeys may name. */
  migrations: Type.Array(MigrationSchema, { default: [] }),
  analytics: AnalyticsConfigSchema,
  /** The gateway: requests matching a route are verified and, when allowed, proxied to its upstream. */
  routes: Type.Array(RouteSchema, { default: [] }),
  gateway: GatewaySettingsSchema,
  dashboard: DashboardConfigSchema,
  webhooks: WebhooksConfigSchema,
});

export type KeygateConfig = Static<typeof ConfigSchema>;

/** Exported for tests and tools that check identifier shapes the same way the config does. */
export const PATTERNS = { id: ID_PATTERN, externalId: EXTERNAL_ID_PATTERN, name: NAME_PATTERN } as const;
