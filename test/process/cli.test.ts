import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { CLI_ENTRY, post, run, startServer } from "../helpers/process.js";
import { REDIS_URL, uniquePrefix } from "../helpers/redis.js";
import { waitFor } from "../helpers/wait.js";

t.test("keygate root-key create/list/revoke against the configured Redis", async (t) => {
  const prefix = uniquePrefix(t, "cli");
  const path = join(mkdtempSync(join(tmpdir(), "keygate-cli-")), "keygate.yaml");
  writeFileSync(path, `storage:\n  redis: { url: "${REDIS_URL}", prefix: "${prefix}" }\n`);
  const env = { KEYGATE_CONFIG: path };

  const created = await run(
    CLI_ENTRY,
    ["root-key", "create", "--workspace", "ws_cli", "--permission", "api.*.create_api", "--permission", "api.*.read_api", "--name", "ci"],
    env,
  );
  t.equal(created.code, 0, "create exits 0");
  const rootKey = created.stdout.trim();
  t.match(rootKey, /^root_[1-9A-HJ-NP-Za-km-z]+$/, "stdout holds only the key");
  t.match(created.stderr, /shown only this once/);

  const server = await startServer(t, env);
  t.notMatch(server.stdout(), /bootstrap root key/, "the CLI's key counts as an existing root key");
  const api = await post(server.baseUrl, "apis.createApi", rootKey, { name: "from-cli" });
  t.equal(api.status, 200);
  const denied = await post(server.baseUrl, "apis.deleteApi", rootKey, { apiId: api.body.data.apiId });
  t.equal(denied.status, 403, "only the permissions given");

  const listed = await run(CLI_ENTRY, ["root-key", "list"], env);
  t.equal(listed.code, 0);
  const [header, row, ...more] = listed.stdout.trim().split("\n");
  t.equal(header, "ID\tWORKSPACE\tSTATE\tNAME\tPERMISSIONS", "a header row names the tab-separated columns");
  t.same(more, []);
  const [id, workspace, state, name, permissions] = (row as string).split("\t");
  t.match(id, /^key_/);
  t.same([workspace, state, name, permissions], ["ws_cli", "active", "ci", "api.*.create_api,api.*.read_api"]);
  t.notMatch(listed.stdout, rootKey, "the key itself is never listed");
  const asJson = await run(CLI_ENTRY, ["root-key", "list", "--json"], env);
  t.equal(asJson.code, 0);
  const [listedKey] = JSON.parse(asJson.stdout) as Record<string, unknown>[];
  t.match(listedKey, {
    id,
    workspaceId: "ws_cli",
    state: "active",
    name: "ci",
    permissions: ["api.*.create_api", "api.*.read_api"],
    createdAt: Number,
  });
  t.notOk("hash" in (listedKey as object), "--json lists no hash either");
  t.notMatch(asJson.stdout, rootKey);

  const revoked = await run(CLI_ENTRY, ["root-key", "revoke", id as string], env);
  t.equal(revoked.code, 0);
  t.equal(
    (await post(server.baseUrl, "apis.createApi", rootKey, { name: "too-late" })).status,
    401,
    "the running keygate refuses it at once, though it had it cached",
  );
  await server.stop();
  t.equal((await run(CLI_ENTRY, ["root-key", "revoke", id as string], env)).code, 2, "revoking twice is an error");
});

t.test("the CLI explains what is wrong with its arguments and storage", async (t) => {
  const noRedis = await run(CLI_ENTRY, ["root-key", "create", "--workspace", "ws_a", "--permission", "*"], {});
  t.equal(noRedis.code, 2);
  t.match(noRedis.stderr, /need a Redis store: set REDIS_URL/);
  const env = { REDIS_URL };
  const noPermission = await run(CLI_ENTRY, ["root-key", "create", "--workspace", "ws_a"], env);
  t.equal(noPermission.code, 2);
  t.match(noPermission.stderr, /at least one --permission/);
  const badWorkspace = await run(CLI_ENTRY, ["root-key", "create", "--workspace", "ws a", "--permission", "*"], env);
  t.match(badWorkspace.stderr, /--workspace is required/);
  const unknown = await run(CLI_ENTRY, ["frobnicate"], env);
  t.equal(unknown.code, 2);
  t.match(unknown.stderr, /unknown command/);
  const help = await run(CLI_ENTRY, ["help"], {});
  t.equal(help.code, 0);
  t.match(help.stdout, /root-key create --workspace/);
});

t.test("keygate ratelimit-namespace list/delete: a deleted namespace answers 410 on a running keygate", async (t) => {
  const prefix = uniquePrefix(t, "cli-namespaces");
  const path = join(mkdtempSync(join(tmpdir(), "keygate-cli-")), "keygate.yaml");
  writeFileSync(
    path,
    `storage:\n  redis: { url: "${REDIS_URL}", prefix: "${prefix}" }\nrootKeys:\n  - { key: "root_cli_namespaces", workspaceId: ws_cli, permissions: ["*"] }\n`,
  );
  const env = { KEYGATE_CONFIG: path };
  const server = await startServer(t, env);
  const limit = () =>
    post(server.baseUrl, "ratelimit.limit", "root_cli_namespaces", {
      namespace: "emails",
      identifier: "alice",
      limit: 5,
      duration: 60_000,
    });
  t.equal((await limit()).status, 200, "the namespace is created on first use");

  const listed = await run(CLI_ENTRY, ["ratelimit-namespace", "list", "--workspace", "ws_cli"], env);
  t.equal(listed.code, 0);
  const [header, row] = listed.stdout.trim().split("\n");
  t.equal(header, "ID\tSTATE\tNAME");
  const [id, state, name] = (row as string).split("\t");
  t.match(id, /^rlns_/);
  t.same([state, name], ["active", "emails"]);

  const deleted = await run(CLI_ENTRY, ["ratelimit-namespace", "delete", "emails", "--workspace", "ws_cli"], env);
  t.equal(deleted.code, 0);
  t.match(deleted.stdout, new RegExp(`${id} \\('emails'\\) deleted`));
  // The running keygate learns of the deletion when its namespace cache refreshes; the bound only ends a failing test.
  const status = await waitFor("the running keygate refusing the deleted namespace", 15_000, async () => {
    const answer = (await limit()).status;
    return answer === 200 ? undefined : answer;
  });
  t.equal(status, 410, "limit answers 410 ratelimit_namespace_gone");
  t.match((await run(CLI_ENTRY, ["ratelimit-namespace", "list", "--workspace", "ws_cli"], env)).stdout, /\tdeleted\temails/);

  const again = await run(CLI_ENTRY, ["ratelimit-namespace", "delete", id as string, "--workspace", "ws_cli"], env);
  t.equal(again.code, 2, "deleting twice is an error");
  t.match(again.stderr, /no live rate limit namespace/);
  const noWorkspace = await run(CLI_ENTRY, ["ratelimit-namespace", "list"], env);
  t.equal(noWorkspace.code, 2);
  t.match(noWorkspace.stderr, /--workspace is required/);
  await server.stop();
});
