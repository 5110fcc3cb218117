import { fileURLToPath } from "node:url";
import t from "tap";
import { analyticsDir } from "../helpers/analytics.js";
import { run } from "../helpers/process.js";

const CHILD = fileURLToPath(new URL("../helpers/analytics-child.js", import.meta.url));

t.test("the embedded engine keeps its data on disk: what one process wrote, the next one reads", async (t) => {
  const dir = analyticsDir(t);
  const env = { PATH: process.env.PATH ?? "" };
  const first = await run(CHILD, ["write", dir, "25"], env);
  t.equal(first.code, 0, first.stderr);
  t.match(JSON.parse(first.stdout), { recorded: 25, written: 25 }, "written by the close at exit");
  const second = await run(CHILD, ["write", dir, "5"], env);
  t.equal(second.code, 0, second.stderr);

  const read = await run(CHILD, ["query", dir, "SELECT count() AS n, uniqExact(request_id) AS ids FROM key_verifications_v1"], env);
  t.equal(read.code, 0, read.stderr);
  t.same(JSON.parse(read.stdout).data, [{ n: 30, ids: 25 }], "both processes' events, and the schema was not re-created over them");
});
