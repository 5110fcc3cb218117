import { Type } from "typebox";
import { describedPattern } from "../../../http/patterns.js";

/**
 * Unkey's gateway.* procedures address a deployment by project, app and environment. keygate has one gateway and
 * one environment: `app` names a route (by id or name); `project` and `environment` are accepted as Unkey's SDK
 * sends them and otherwise ignored (docs/api.md#gateway).
 */
const RESOURCE = Type.String({
  minLength: 3,
  maxLength: 255,
  pattern: describedPattern("^[a-zA-Z0-9_-]+$", "contain only letters, digits, _ and -"),
});

export const DeploymentTarget = {
  project: RESOURCE,
  app: Type.String({ minLength: 1, maxLength: 255 }),
  environment: RESOURCE,
};
