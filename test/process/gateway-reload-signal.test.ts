import { writeFileSync } from "node:fs";
import t from "tap";
import { startGatewayProcess } from "../helpers/process.js";
import { startUpstream } from "../helpers/upstream.js";
import { waitFor } from "../helpers/wait.js";

t.test("SIGHUP reloads the routes of a keygate process; a file that has become invalid leaves the routes in force", async (t) => {
  const first = await startUpstream(t);
  const second = await startUpstream(t);
  const gateway = await startGatewayProcess(t, { upstream: first.url, watchConfig: false });
  const { server } = gateway;
  t.match(server.stdout(), /gateway: svc \(\/svc -> http:\/\/127\.0\.0\.1:\d+\)/, "the start-up line names the route");
  t.equal((await gateway.get("/svc/x")).status, 200);
  t.same(
    first.seen.map((request) => request.url),
    ["/svc/x"],
  );

  gateway.routeTo(second.url);
  server.child.kill("SIGHUP");
  await waitFor(
    "the new upstream serving after SIGHUP",
    10_000,
    async () =>
      ((await gateway.get("/svc/after-sighup")).status === 200 && second.seen.some((request) => request.url === "/svc/after-sighup")) ||
      undefined,
  );
  t.pass("after SIGHUP the new upstream serves");

  writeFileSync(gateway.path, "routes: [ { name: broken } ]\n");
  server.child.kill("SIGHUP");
  // keygate logs that it refused the file: the reload has been tried.
  await waitFor("keygate refusing the invalid file", 10_000, () => /configuration file is invalid/.test(server.stdout()) || undefined);
  const stillServed = await gateway.get("/svc/after-bad-file");
  t.equal(stillServed.status, 200, "the routes in force stay");
  t.ok(
    second.seen.some((request) => request.url === "/svc/after-bad-file"),
    "on the upstream they name",
  );
  await server.stop();
});
