import { type Static, Type } from "typebox";
import { describedPattern } from "../http/patterns.js";
import { Strict } from "../http/schemas.js";
import { EMPTY } from "./schema-parts.js";

/** The dashboard (docs/operations.md#dashboard): where it is served and how long its sessions last. */
export const DashboardConfigSchema = Strict(
  {
    /** Serve the dashboard and its session endpoints; false serves neither. */
    enabled: Type.Boolean({ default: true }),
    /** Where: one or more path segments, no trailing slash (checked after the schema: not under /v2, not /metrics). */
    path: Type.String({
      minLength: 2,
      maxLength: 100,
      pattern: describedPattern(
        "^(/[a-z0-9_-]+)+$",
        "be an absolute path of lower-case letters, digits, _ and - segments, without a trailing /",
      ),
      default: "/dashboard",
    }),
    /** A session not used for this long ends. */
    sessionIdleTimeoutMs: Type.Integer({ minimum: 60_000, maximum: 86_400_000, default: 1_800_000 }),
    /** A session ends this long after sign-in, however it is used. */
    sessionAbsoluteTimeoutMs: Type.Integer({ minimum: 60_000, maximum: 2_592_000_000, default: 43_200_000 }),
  },
  EMPTY,
);

export type DashboardConfig = Static<typeof DashboardConfigSchema>;
