import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t, { type Test } from "tap";
import { buildApp } from "../src/app.js";
import { BOOTSTRAP_KEY_FILE, deliverBootstrapRootKey, ensureBootstrapRootKey, type StartupLog } from "../src/bootstrap.js";
import { validateConfig } from "../src/config/load.js";

/** An app with no root key at all (so a bootstrap key is made), and a directory of its own. */
async function setup(t: Test) {
  const app = await buildApp(validateConfig({ analytics: { engine: "off" } }), { logger: false });
  t.teardown(() => app.close());
  const directory = mkdtempSync(join(tmpdir(), "keygate-bootstrap-"));
  t.teardown(() => rmSync(directory, { recursive: true, force: true }));
  const created = await ensureBootstrapRootKey(app.services);
  if (!created) throw new Error("a bootstrap key was expected");
  const logged: { level: string; details: object; message: string }[] = [];
  const log: StartupLog = {
    info: (details, message) => void logged.push({ level: "info", details, message }),
    warn: (details, message) => void logged.push({ level: "warn", details, message }),
    error: (details, message) => void logged.push({ level: "error", details, message }),
  };
  const works = async () => app.services.rootKeys.authenticate(created.key);
  return { app, directory, created, log, logged, works };
}

t.test("on a terminal the key is to be shown once on stderr, with a command to try it, and the log only says so", async (t) => {
  const { app, directory, created, log, logged, works } = await setup(t);
  const delivery = await deliverBootstrapRootKey(app.services, created, { terminal: true, directory, port: 8080, log });
  if (delivery.to !== "terminal") throw new Error(`delivered to ${delivery.to}`);
  const banner = delivery.banner;
  t.equal(banner.split(created.key).length - 1, 1, "the key, once");
  t.match(banner, /ROOT KEY \(workspace ws_default, every permission\)/);
  t.match(banner, /curl -s -X POST http:\/\/localhost:8080\/v2\/apis\.createApi -H "Authorization: Bearer \$ROOT_KEY"/);
  t.same(
    logged.map((entry) => entry.level),
    ["info"],
  );
  t.notMatch(JSON.stringify(logged), created.key, "the log line does not hold the key");
  t.notOk(existsSync(join(directory, BOOTSTRAP_KEY_FILE)), "no file");
  t.equal((await works()).workspaceId, "ws_default");
});

t.test("without a terminal the key goes to a file only its owner can read, and a warning says where", async (t) => {
  const { app, directory, created, log, logged, works } = await setup(t);
  const path = join(directory, BOOTSTRAP_KEY_FILE);
  const delivery = await deliverBootstrapRootKey(app.services, created, { terminal: false, directory, port: 8080, log });
  t.same(delivery, { to: "file", path });
  t.equal(readFileSync(path, "utf8"), `${created.key}\n`);
  t.equal(statSync(path).mode & 0o777, 0o600);
  t.same(
    logged.map((entry) => entry.level),
    ["warn"],
  );
  t.same(logged[0]?.details, { workspaceId: "ws_default", file: path });
  t.match(logged[0]?.message, /delete the file/);
  t.notMatch(JSON.stringify(logged), created.key);
  t.equal((await works()).workspaceId, "ws_default");
});

t.test("a file left by an earlier start is replaced, with mode 0600 whatever it had", async (t) => {
  const { app, directory, created, log } = await setup(t);
  const path = join(directory, BOOTSTRAP_KEY_FILE);
  await deliverBootstrapRootKey(app.services, created, { terminal: false, directory, port: 8080, log });
  rmSync(path);
  writeFileSync(path, "root_old\n", { mode: 0o644 });
  await deliverBootstrapRootKey(app.services, created, { terminal: false, directory, port: 8080, log });
  t.equal(readFileSync(path, "utf8"), `${created.key}\n`);
  t.equal(statSync(path).mode & 0o777, 0o600);
});

t.test("a key that cannot be written is revoked, and the error says what to do", async (t) => {
  const { app, directory, created, log, logged, works } = await setup(t);
  writeFileSync(join(directory, "data"), "not a directory");
  const delivery = await deliverBootstrapRootKey(app.services, created, { terminal: false, directory, port: 8080, log });
  t.same(delivery, { to: "nowhere" });
  t.same(
    logged.map((entry) => entry.level),
    ["error"],
  );
  t.match(logged[0]?.message, /KEYGATE_ROOT_KEY/);
  t.notMatch(JSON.stringify(logged), created.key);
  await t.rejects(works(), "the key no longer works");
  t.ok(await ensureBootstrapRootKey(app.services), "so the next start makes a new one");
});
