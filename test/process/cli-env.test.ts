import t from "tap";
import { CLI_ENTRY, run } from "../helpers/process.js";
import { REDIS_URL, uniquePrefix } from "../helpers/redis.js";

t.test("REDIS_URL and KEYGATE_REDIS_PREFIX alone choose the store, so exported once they serve every command", async (t) => {
  const env = { REDIS_URL, KEYGATE_REDIS_PREFIX: uniquePrefix(t, "cli-env") };
  const created = await run(CLI_ENTRY, ["root-key", "create", "--workspace", "ws_env", "--permission", "*"], env);
  t.equal(created.code, 0, created.stderr);
  const listed = await run(CLI_ENTRY, ["root-key", "list", "--workspace", "ws_env"], env);
  t.equal(listed.stdout.trim().split("\n").length, 2, "the key is found under the same prefix");
  const elsewhere = await run(CLI_ENTRY, ["root-key", "list", "--workspace", "ws_env"], {
    ...env,
    KEYGATE_REDIS_PREFIX: uniquePrefix(t, "cli-env-other"),
  });
  t.equal(elsewhere.stdout.trim(), "ID\tWORKSPACE\tSTATE\tNAME\tPERMISSIONS", "and not under another prefix: only the header row");
  const alone = await run(CLI_ENTRY, ["root-key", "list"], { KEYGATE_REDIS_PREFIX: "x" });
  t.equal(alone.code, 1);
  t.match(alone.stderr, /KEYGATE_REDIS_PREFIX: needs a Redis store/);
});
