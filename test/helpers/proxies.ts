import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, LOOPBACK } from "./ports.js";
import { waitFor } from "./wait.js";

// Real nginx and Caddy in front of keygate, each on a free port with its configuration in a temporary directory,
// stopped by PID. docs/forward-auth.md holds the recipes they run.

interface Teardown {
  teardown(fn: () => unknown): void;
}

export const NGINX = "/usr/sbin/nginx";
export const CADDY = "/usr/bin/caddy";

/** The addresses the recipes are written with, replaced by the test's own. */
const RECIPE_KEYGATE = "127.0.0.1:8080";
const RECIPE_API = "127.0.0.1:9000";

export interface RunningProxy {
  /** http://127.0.0.1:<port> */
  url: string;
  pid: number;
  /** What the proxy wrote to its error log and standard streams so far. */
  log(): string;
}

/** The recipe of docs/forward-auth.md marked `<!-- recipe: name -->`: the code block after the marker. */
export function recipe(name: "nginx" | "caddy" | "traefik" | "keygate"): string {
  const text = readFileSync(new URL("../../../docs/forward-auth.md", import.meta.url), "utf8");
  const marker = text.indexOf(`<!-- recipe: ${name} -->`);
  if (marker === -1) throw new Error(`docs/forward-auth.md has no recipe '${name}'`);
  const start = text.indexOf("\n", text.indexOf("```", marker)) + 1;
  return text.slice(start, text.indexOf("\n```", start) + 1);
}

/** A recipe with the test's addresses: keygate's and the API's (host:port), and the port the proxy listens on. */
function addressed(text: string, keygate: string, api: string): string {
  if (!text.includes(RECIPE_KEYGATE) || !text.includes(RECIPE_API))
    throw new Error("a recipe names keygate and the API by their example addresses");
  return text.replaceAll(RECIPE_KEYGATE, keygate).replaceAll(RECIPE_API, api);
}

/** nginx running the nginx recipe (its `server` and `upstream` blocks) inside a configuration of the test's own. */
export async function startNginx(t: Teardown, addresses: { keygate: string; api: string }): Promise<RunningProxy> {
  const directory = temporaryDirectory(t, "keygate-nginx-");
  const port = await freePort();
  const file = join(directory, "nginx.conf");
  writeFileSync(file, nginxConfiguration(directory, port, addresses));
  return started(t, NGINX, ["-p", directory, "-c", file, "-e", join(directory, "error.log")], {}, port, join(directory, "error.log"));
}

/**
 * A whole nginx configuration (one worker, in the foreground) around the nginx recipe, listening on `port`, its pid,
 * logs and temporary files in `directory`. The forward-auth benchmark runs it too.
 */
export function nginxConfiguration(directory: string, port: number, addresses: { keygate: string; api: string }): string {
  const site = addressed(recipe("nginx"), addresses.keygate, addresses.api).replace(/listen 8000;/, `listen ${LOOPBACK}:${port};`);
  const temp = (name: string) => {
    mkdirSync(join(directory, name), { recursive: true });
    return join(directory, name);
  };
  return [
    "daemon off;",
    "worker_processes 1;",
    // As root (CI), nginx's workers would otherwise run as nobody, who cannot write the temporary directory.
    ...(process.getuid?.() === 0 ? ["user root;"] : []),
    `pid ${join(directory, "nginx.pid")};`,
    `error_log ${join(directory, "error.log")} warn;`,
    "events { worker_connections 1024; }",
    "http {",
    "    access_log off;",
    `    client_body_temp_path ${temp("client_body")};`,
    `    proxy_temp_path ${temp("proxy")};`,
    `    fastcgi_temp_path ${temp("fastcgi")};`,
    `    uwsgi_temp_path ${temp("uwsgi")};`,
    `    scgi_temp_path ${temp("scgi")};`,
    site,
    "}",
    "",
  ].join("\n");
}

/** Caddy running the Caddy recipe, listening on a free port. */
export async function startCaddy(t: Teardown, addresses: { keygate: string; api: string }): Promise<RunningProxy> {
  const directory = temporaryDirectory(t, "keygate-caddy-");
  const port = await freePort();
  const site = addressed(recipe("caddy"), addresses.keygate, addresses.api).replace(/^:8000 \{/m, `http://${LOOPBACK}:${port} {`);
  const file = join(directory, "Caddyfile");
  writeFileSync(file, site);
  // Caddy keeps its state under XDG directories: the temporary one, not the machine's.
  const environment = { XDG_CONFIG_HOME: join(directory, "config"), XDG_DATA_HOME: join(directory, "data"), HOME: directory };
  return started(t, CADDY, ["run", "--config", file, "--adapter", "caddyfile"], environment, port, undefined);
}

function temporaryDirectory(t: Teardown, prefix: string): string {
  const directory = mkdtempSync(join(tmpdir(), prefix));
  t.teardown(() => rmSync(directory, { recursive: true, force: true }));
  return directory;
}

/** Starts `command`, waits until its port takes connections, and stops it (by its PID) when the test ends. */
async function started(
  t: Teardown,
  command: string,
  args: string[],
  environment: Record<string, string>,
  port: number,
  errorLog: string | undefined,
): Promise<RunningProxy> {
  const child: ChildProcess = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...environment } });
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
  });
  const log = () => {
    let text = output;
    if (errorLog !== undefined) {
      try {
        text += readFileSync(errorLog, "utf8");
      } catch {
        // not written yet
      }
    }
    return text;
  };
  if (child.pid === undefined) throw new Error(`${command} did not start`);
  await waitFor(
    `${command} listening on ${port}`,
    15_000,
    async (because) => {
      if (child.exitCode !== null) throw new Error(`${command} exited with ${child.exitCode}`);
      return (await accepts(port)) ? true : because("no connection yet");
    },
    async () => log(),
  );
  return { url: `http://${LOOPBACK}:${port}`, pid: child.pid, log };
}

function accepts(port: number): Promise<boolean | undefined> {
  return new Promise((resolve) => {
    const socket = connect(port, LOOPBACK);
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(undefined));
  });
}
