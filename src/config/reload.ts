import { type FSWatcher, watch } from "node:fs";
import { basename, dirname } from "node:path";
import { isDeepStrictEqual } from "node:util";
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
export function reloadRoutes(snapshot: CurrentGatewaySnapshot, running: KeygateConfig, load: () => KeygateConfig, log: ReloadLog): boolean {
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
  return true;
}

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
      if (changed !== null && changed !== file) return;
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
