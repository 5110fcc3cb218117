import { type FSWatcher, watch } from "node:fs";
import { basename, dirname } from "node:path";
import { isDeepStrictEqual } from "node:util";
import type { AuditChange, AuditTrail } from "../domain/audit/audit-trail.js";
import { TRUST_EVERY_HOP_WARNING } from "../gateway/client-address.js";
import type { CurrentGatewaySnapshot } from "../gateway/gateway-snapshot.js";
import type { KeygateConfig } from "./schema.js";

export interface ReloadLog {
  info(details: object, message: string): void;
  warn(details: object, message: string): void;
  error(details: object, message: string): void;
}

/** Sections a reload applies; every other change waits for a restart. */
const RELOADABLE: ReadonlySet<string> = new Set(["routes", "gateway"]);

/**
 * Applies a freshly loaded configuration's routes and gateway settings. `load` throws when the file is invalid:
 * then nothing changes and the problems are logged. Returns whether the new routes are in force.
 */
export function reloadRoutes(
  snapshot: CurrentGatewaySnapshot,
  running: KeygateConfig,
  load: () => KeygateConfig,
  log: ReloadLog,
  applied?: (next: KeygateConfig, changes: AuditChange[]) => void,
): boolean {
  let next: KeygateConfig;
  try {
    next = load();
  } catch (error) {
    log.error({ err: error }, "the configuration file is invalid; the routes in force stay as they are");
    return false;
  }
  const ignored = Object.keys(next).filter(
    (section) =>
      !RELOADABLE.has(section) && !isDeepStrictEqual(next[section as keyof KeygateConfig], running[section as keyof KeygateConfig]),
  );
  if (ignored.length > 0) log.warn({ sections: ignored }, "changes to these sections take effect after a restart");
  try {
    snapshot.applyConfig(next);
  } catch (error) {
    log.error({ err: error }, "the configuration's routes are invalid; the routes in force stay as they are");
    return false;
  }
  log.info({ routes: next.routes.map((route) => route.name) }, "routes reloaded");
  if (next.gateway.trustProxy === true) log.warn({}, TRUST_EVERY_HOP_WARNING);
  applied?.(next, reloadChanges(running, next));
  return true;
}

/**
 * What a reload changed, for its audit entry: the list of route names, each route whose definition changed, and the
 * gateway settings. Credentials in an upstream URL are masked.
 */
export function reloadChanges(running: KeygateConfig, next: KeygateConfig): AuditChange[] {
  const masked = (value: unknown): unknown =>
    value === undefined ? null : JSON.parse(JSON.stringify(value).replace(/\/\/[^/@"\s]*@/g, "//***@"));
  const changes: AuditChange[] = [];
  const names = (config: KeygateConfig) => config.routes.map((route) => route.name);
  if (!isDeepStrictEqual(names(running), names(next))) changes.push({ field: "routes", old: names(running), new: names(next) });
  for (const name of new Set([...names(running), ...names(next)])) {
    const before = running.routes.find((route) => route.name === name);
    const after = next.routes.find((route) => route.name === name);
    if (!isDeepStrictEqual(before, after)) changes.push({ field: `routes.${name}`, old: masked(before), new: masked(after) });
  }
  if (!isDeepStrictEqual(running.gateway, next.gateway))
    changes.push({ field: "gateway", old: masked(running.gateway), new: masked(next.gateway) });
  return changes;
}

/** The workspaces a configuration names (root keys, APIs, routes): those a reload's audit entry is recorded in. */
export function configuredWorkspaces(config: KeygateConfig): string[] {
  const workspaces = [
    ...config.rootKeys.map((rootKey) => rootKey.workspaceId),
    ...config.apis.map((api) => api.workspaceId),
    ...config.routes.flatMap((route) => (route.workspaceId === undefined ? [] : [route.workspaceId])),
  ];
  return [...new Set(workspaces)];
}

/** The link a Kubernetes ConfigMap (or Secret) volume swaps to update its files atomically. */
const CONFIG_MAP_DATA_LINK = "..data";

/**
 * Reloads on SIGHUP and, when `watchFile`, whenever the file changes. The directory is watched rather than the
 * file, because editors and config managers replace files rather than writing them in place; changes within
 * `debounceMs` are one reload.
 */
export function watchRoutes(options: { path: string; watchFile: boolean; reload: () => void; debounceMs?: number }): () => void {
  const onSignal = () => options.reload();
  process.on("SIGHUP", onSignal);
  let watcher: FSWatcher | undefined;
  let timer: NodeJS.Timeout | undefined;
  if (options.watchFile) {
    const file = basename(options.path);
    watcher = watch(dirname(options.path), (_event, changed) => {
      // A Kubernetes ConfigMap volume updates every file at once by swapping its `..data` link: the file's own name
      // sees no event then.
      if (changed !== null && changed !== file && changed !== CONFIG_MAP_DATA_LINK) return;
      clearTimeout(timer);
      timer = setTimeout(options.reload, options.debounceMs ?? 100);
    });
  }
  return () => {
    process.off("SIGHUP", onSignal);
    clearTimeout(timer);
    watcher?.close();
  };
}

/** One entry per workspace the new configuration names, by the system actor, when a reload changed something. */
export function recordReload(audit: AuditTrail, next: KeygateConfig, changes: AuditChange[]): void {
  if (changes.length === 0) return;
  for (const workspaceId of configuredWorkspaces(next)) {
    audit.recordSystem(workspaceId, {
      action: "config.reload",
      description: `Reloaded the configuration file: ${changes.map((change) => change.field).join(", ")} changed`,
      resources: [],
      changes,
    });
  }
}
