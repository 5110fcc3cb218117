import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { CLI_ENTRY, post, run, startServer } from "../helpers/process.js";
import { REDIS_URL, uniquePrefix } from "../helpers/redis.js";

const ROOT_KEY = "root_cli_key_import_test";
const API = "api_imported_keys";
const KEYS = 2_500;

const hexOf = (text: string) => createHash("sha256").update(text).digest("hex");

/** A directory with a configuration on the test Redis under `prefix`: the workspace, API and migration the imports use. */
function importSetup(prefix: string): { directory: string; env: Record<string, string> } {
  const directory = mkdtempSync(join(tmpdir(), "keygate-import-"));
  const config = join(directory, "keygate.yaml");
  writeFileSync(
    config,
    [
      `storage:\n  redis: { url: "${REDIS_URL}", prefix: "${prefix}" }`,
      `rootKeys:\n  - { key: ${ROOT_KEY}, workspaceId: ws_import, permissions: ["*"] }`,
      `apis:\n  - { id: ${API}, name: imported, workspaceId: ws_import }`,
      "migrations:\n  - { id: legacy, workspaceId: ws_import, scheme: sha256-hex }",
      "analytics: { engine: 'off' }",
      "",
    ].join("\n"),
  );
  return { directory, env: { KEYGATE_CONFIG: config } };
}

t.test("keygate keys migrate imports a JSON-lines file in batches through keys.migrateKeys", async (t) => {
  const { directory, env } = importSetup(uniquePrefix(t, "cli-import"));
  // The server creates the declared API; the CLI then imports into it.
  const server = await startServer(t, env);

  const plaintexts = Array.from({ length: KEYS }, () => `old_${randomBytes(16).toString("hex")}`);
  const lines = plaintexts.map((key, index) =>
    JSON.stringify({ hash: hexOf(key), name: `user ${index}`, externalId: `user_${index % 10}` }),
  );
  // A blank line is skipped; the first key again fails as a duplicate, the last line of the file.
  const file = join(directory, "keys.jsonl");
  writeFileSync(file, `${lines.slice(0, 10).join("\n")}\n\n${lines.slice(10).join("\n")}\n${lines[0]}\n`);

  const imported = await run(
    CLI_ENTRY,
    ["keys", "migrate", "--workspace", "ws_import", "--api", API, "--migration", "legacy", "--file", file, "--batch", "1000"],
    env,
  );
  t.equal(imported.code, 0, imported.stderr);
  const results = imported.stdout
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as { line: number; hash: string; keyId?: string; failed?: string });
  t.equal(results.length, KEYS + 1, "one line of output per key");
  t.equal(results.filter((result) => result.keyId !== undefined).length, KEYS);
  t.same(results.at(-1), { line: KEYS + 2, hash: hexOf(plaintexts[0] as string), failed: "exists" }, "the duplicate, by its line");
  t.equal(results[10]?.line, 12, "lines are counted as in the file, blank ones included");
  t.match(imported.stderr, /imported 1000 of 2501 keys/, "progress per batch");
  t.match(imported.stderr, /Migrated 2500 keys into api_imported_keys under migration 'legacy'; 1 failed/);

  for (const index of [0, 1_234, KEYS - 1]) {
    const verified = await post(server.baseUrl, "keys.verifyKey", ROOT_KEY, { key: plaintexts[index] });
    t.equal(verified.body.data.code, "VALID", `key ${index} verifies in the running keygate`);
    t.equal(verified.body.data.name, `user ${index}`);
    t.equal(verified.body.data.keyId, results.find((result) => result.line === (index < 10 ? index + 1 : index + 2))?.keyId);
  }

  const again = await run(
    CLI_ENTRY,
    ["keys", "migrate", "--workspace", "ws_import", "--api", API, "--migration", "legacy", "--file", file],
    env,
  );
  t.equal(again.code, 0);
  t.match(again.stderr, /Migrated 0 keys .*; 2501 failed/, "a rerun stores nothing twice");

  const broken = join(directory, "broken.jsonl");
  writeFileSync(broken, `${lines[1]}\nnot json\n{"hash":"ab","nmae":"typo"}\n`);
  const refused = await run(
    CLI_ENTRY,
    ["keys", "migrate", "--workspace", "ws_import", "--api", API, "--migration", "legacy", "--file", broken],
    env,
  );
  t.equal(refused.code, 1);
  t.match(refused.stderr, /nothing was imported/);
  t.match(refused.stderr, /line 2: is not JSON/);
  t.match(refused.stderr, /line 3\.nmae: is not a known field/);
  t.match(refused.stderr, /line 3\.hash/);

  const wrongScheme = join(directory, "wrong-scheme.jsonl");
  writeFileSync(wrongScheme, `${JSON.stringify({ hash: "b".repeat(64) })}\n${JSON.stringify({ hash: "bm90IGhleA==" })}\n`);
  const wrong = await run(
    CLI_ENTRY,
    ["keys", "migrate", "--workspace", "ws_import", "--api", API, "--migration", "legacy", "--file", wrongScheme],
    env,
  );
  t.equal(wrong.code, 1);
  t.match(wrong.stderr, /line 2: hash is not a SHA-256 digest in hex/, "the domain's 400, told by line");

  const unknownMigration = await run(
    CLI_ENTRY,
    ["keys", "migrate", "--workspace", "ws_import", "--api", API, "--migration", "nope", "--file", file],
    env,
  );
  t.equal(unknownMigration.code, 1);
  t.match(unknownMigration.stderr, /No migration 'nope'/);
  const usage = await run(CLI_ENTRY, ["keys", "migrate", "--workspace", "ws_import", "--api", API, "--file", file], env);
  t.equal(usage.code, 2);
  t.match(usage.stderr, /--migration is required/);
  const tooBig = await run(
    CLI_ENTRY,
    ["keys", "migrate", "--workspace", "ws_import", "--api", API, "--migration", "legacy", "--file", file, "--batch", "20000"],
    env,
  );
  t.equal(tooBig.code, 2);
  t.match(tooBig.stderr, /--batch may be at most 10000/);

  // Imported keys are written in the compact form: `keys compact` finds none to move (its moving is
  // test/storage/redis-key-form.test.ts's).
  const compacted = await run(CLI_ENTRY, ["keys", "compact"], env);
  t.equal(compacted.code, 0, compacted.stderr);
  t.match(compacted.stderr, /Moved 0 keys to the compact form/);
  const stray = await run(CLI_ENTRY, ["keys", "compact", "--workspace", "ws_import"], env);
  t.equal(stray.code, 2, "keys compact takes no options");
  await server.stop();
});

t.test("an import streams a large file, and one killed half-way goes on with --resume, storing every key once", async (t) => {
  const { directory, env } = importSetup(uniquePrefix(t, "cli-resume"));
  const server = await startServer(t, env);
  const count = 20_000;
  const plaintext = (n: number) => `resumed_${n}`;
  const file = join(directory, "keys.jsonl");
  writeFileSync(
    file,
    `${Array.from({ length: count }, (_, n) => JSON.stringify({ hash: hexOf(plaintext(n)), name: `user ${n}` })).join("\r\n")}\r\n`,
  );
  const args = ["keys", "migrate", "--workspace", "ws_import", "--api", API, "--migration", "legacy", "--file", file, "--batch", "1000"];
  const position = `${file}.position`;

  // The first run is killed once it has stored a few batches.
  const first = spawn(process.execPath, [CLI_ENTRY, ...args], {
    env: { PATH: process.env.PATH ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let firstOut = "";
  const killed = new Promise<NodeJS.Signals | null>((resolve) => first.on("exit", (_code, signal) => resolve(signal)));
  first.stdout.on("data", (chunk: Buffer) => {
    firstOut += chunk.toString();
    if (firstOut.split("\n").length > 3_000 && existsSync(position)) first.kill("SIGKILL");
  });
  first.stderr.resume();
  t.equal(await killed, "SIGKILL", "killed half-way");
  const saved = JSON.parse(readFileSync(position, "utf8")) as { line: number; offset: number; migrated: number };
  t.ok(saved.line >= 1_000 && saved.line < count, `the position after the last batch stored: line ${saved.line}`);

  const again = await run(CLI_ENTRY, args, env);
  t.equal(again.code, 1, "without --resume an interrupted import is not started over");
  t.match(again.stderr, /add --resume to go on from there/);

  const resumed = await run(CLI_ENTRY, [...args, "--resume"], env);
  t.equal(resumed.code, 0, resumed.stderr);
  t.match(resumed.stderr, new RegExp(`Resuming at line ${saved.line + 1}`));
  t.match(resumed.stderr, new RegExp(`imported ${count} of ${count} keys`), "progress counts the whole file");
  t.notOk(existsSync(position), "the position is removed once the import is done");
  const results = (text: string) =>
    text
      .trim()
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => JSON.parse(line) as { line: number; keyId?: string; failed?: string });
  const after = results(resumed.stdout);
  t.same(
    after.map((result) => result.line),
    Array.from({ length: count - saved.line }, (_, i) => saved.line + 1 + i),
    "every line after the position, once",
  );
  const repeated = after.filter((result) => result.failed === "exists");
  t.ok(repeated.length <= 1_000, `only keys of the batch cut short were there already (${repeated.length})`);
  const storedBefore = new Set(results(firstOut).flatMap((result) => (result.keyId ? [result.line] : [])));
  for (const result of repeated) t.ok(storedBefore.has(result.line) || result.line > saved.line, "stored by the killed run");
  const keyIds = new Set([...results(firstOut), ...after].flatMap((result) => (result.keyId ? [result.keyId] : [])));
  t.equal(keyIds.size, count, "every key stored exactly once");
  for (const n of [0, saved.line - 1, saved.line, count - 1]) {
    const verified = await post(server.baseUrl, "keys.verifyKey", ROOT_KEY, { key: plaintext(n) });
    t.equal(verified.body.data.code, "VALID", `key on line ${n + 1} verifies`);
  }
  const nothing = await run(CLI_ENTRY, [...args, "--resume"], env);
  t.equal(nothing.code, 1);
  t.match(nothing.stderr, /no interrupted import to resume/);
  await server.stop();
});
