import t from "tap";
import { startGatewayProcess } from "../helpers/process.js";
import { startUpstream } from "../helpers/upstream.js";
import { waitFor } from "../helpers/wait.js";

t.test("with watchConfig on, editing the file reloads the routes by itself; with it off, the same edit waits for SIGHUP", async (t) => {
  const first = await startUpstream(t);
  const second = await startUpstream(t);
  const [watching, unwatched] = await Promise.all([
    startGatewayProcess(t, { upstream: first.url, watchConfig: true }),
    startGatewayProcess(t, { upstream: first.url, watchConfig: false }),
  ]);
  const servedBy = (upstream: typeof first, path: string) => upstream.seen.some((request) => request.url === path);
  t.equal((await watching.get("/svc/watching-before")).status, 200);
  t.equal((await unwatched.get("/svc/unwatched-before")).status, 200);
  t.ok(servedBy(first, "/svc/watching-before") && servedBy(first, "/svc/unwatched-before"), "both serve the first upstream");

  // The unwatched file is edited first: by the time the watching process has reloaded, that edit has been there
  // at least as long.
  unwatched.routeTo(second.url);
  watching.routeTo(second.url);
  await waitFor(
    "the watching process serving the new upstream",
    10_000,
    async () => ((await watching.get("/svc/watching-after")).status === 200 && servedBy(second, "/svc/watching-after")) || undefined,
  );
  t.pass("the edited file's upstream serves, without a signal");

  t.equal((await unwatched.get("/svc/unwatched-after")).status, 200);
  t.ok(servedBy(first, "/svc/unwatched-after"), "without the watch, the same edit has changed nothing");
  unwatched.server.child.kill("SIGHUP");
  await waitFor(
    "the unwatched process serving the new upstream after SIGHUP",
    10_000,
    async () => ((await unwatched.get("/svc/unwatched-sighup")).status === 200 && servedBy(second, "/svc/unwatched-sighup")) || undefined,
  );
  t.pass("until SIGHUP");
  await Promise.all([watching.server.stop(), unwatched.server.stop()]);
});
