import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { DEFAULTS } from "./config/defaults.js";
import { rootKeyCreated } from "./domain/root-keys/root-key-service.js";
import type { Services } from "./services.js";

/** The file a bootstrap root key is written to when no terminal can show it, relative to the working directory. */
export const BOOTSTRAP_KEY_FILE = "data/bootstrap-root-key";

export interface BootstrapRootKey {
  id: string;
  key: string;
  workspaceId: string;
}

/**
 * When neither the configuration nor the environment gives a root key and the store holds none, a root key with
 * every permission is created in workspace `ws_default`, so a new user can call the API at once. Returns it (the
 * plaintext is to be handed over once, by deliverBootstrapRootKey), or undefined when root keys exist already.
 */
export async function ensureBootstrapRootKey(services: Services): Promise<BootstrapRootKey | undefined> {
  if (services.rootKeys.hasConfiguredKeys) return undefined;
  if ((await services.rootKeys.list()).some((rootKey) => rootKey.revokedAt === undefined)) return undefined;
  const workspaceId = DEFAULTS.bootstrapWorkspaceId;
  const { id, key, record } = await services.rootKeys.create({ workspaceId, permissions: ["*"], name: "bootstrap" });
  services.audit.recordSystem(workspaceId, rootKeyCreated(record));
  return { id, key, workspaceId };
}

/** The start-up log (never given the key). */
export interface StartupLog {
  info(details: object, message: string): void;
  warn(details: object, message: string): void;
  error(details: object, message: string): void;
}

export interface DeliveryOptions {
  /** Whether a person is at a terminal (the process's stderr is a TTY): the key is then shown there. */
  terminal: boolean;
  /** The working directory; the file is BOOTSTRAP_KEY_FILE under it. */
  directory: string;
  /** The port keygate listens on, for the example command. */
  port: number;
  log: StartupLog;
}

/**
 * Where the key goes: to the terminal (the caller writes `banner` to stderr, after the start-up lines), to the
 * file, or nowhere (then it was revoked).
 */
export type Delivery = { to: "terminal"; banner: string } | { to: "file"; path: string } | { to: "nowhere" };

/**
 * Hands a new bootstrap root key to the person starting keygate, once, and keeps it out of the log (stdout is a
 * stream of JSON log lines that collectors keep). On a terminal the key is shown there: the returned banner is
 * for stderr. Otherwise it is written to BOOTSTRAP_KEY_FILE with mode 0600, and a log line says where and that
 * the file is to be deleted once read. A key that cannot be written is revoked, so the next start makes a new
 * one; the log says how to give keygate a root key instead. The log lines name the file, never the key.
 */
export async function deliverBootstrapRootKey(services: Services, created: BootstrapRootKey, options: DeliveryOptions): Promise<Delivery> {
  const { log } = options;
  const { workspaceId } = created;
  if (options.terminal) {
    log.info(
      { workspaceId, shownOn: "stderr" },
      `created a bootstrap root key with every permission (workspace ${workspaceId}); it is shown on the terminal, once, and never logged`,
    );
    return { to: "terminal", banner: terminalBanner(created, options.port) };
  }
  const path = resolve(options.directory, BOOTSTRAP_KEY_FILE);
  try {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    // A file left by an earlier start goes first: a new file gets mode 0600 whatever the old one had, and "wx"
    // refuses to follow anything put in its place meanwhile.
    rmSync(path, { force: true });
    writeFileSync(path, `${created.key}\n`, { mode: 0o600, flag: "wx" });
  } catch (error) {
    await services.rootKeys.revoke(created.id);
    log.error(
      { err: error, workspaceId, file: path },
      `could not write the bootstrap root key to ${path}, so it was revoked; a new one is made at the next start. Or give keygate a root key: KEYGATE_ROOT_KEY, rootKeys in the configuration, or 'npx keygate root-key create' (Redis)`,
    );
    return { to: "nowhere" };
  }
  log.warn(
    { workspaceId, file: path },
    `created a bootstrap root key with every permission (workspace ${workspaceId}) and wrote it to ${path}, readable only by this user: read it, keep it safe, then delete the file`,
  );
  return { to: "file", path };
}

/** What a person at a terminal sees: the key once, and a command to try it with. */
function terminalBanner(created: BootstrapRootKey, port: number): string {
  return [
    "",
    `ROOT KEY (workspace ${created.workspaceId}, every permission). It is shown only this once and is not in the log; keep it safe:`,
    "",
    `  ${created.key}`,
    "",
    "Try it, with ROOT_KEY set to that key:",
    `  curl -s -X POST http://localhost:${port}/v2/apis.createApi -H "Authorization: Bearer $ROOT_KEY" \\`,
    `    -H "Content-Type: application/json" -d '{"name":"my-api"}'`,
    "",
    "",
  ].join("\n");
}
