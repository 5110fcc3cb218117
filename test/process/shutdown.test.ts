import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import t, { type Test } from "tap";
import { post, type RunningServer, startServer } from "../helpers/process.js";
import { REDIS_URL, uniquePrefix } from "../helpers/redis.js";
import { waitFor, within } from "../helpers/wait.js";

// keygate as a process under SIGTERM: requests in flight finish, new ones are refused, the process exits 0 within
// server.shutdownTimeoutMs; the deadline or a second signal ends it at once, saying what was cut. A rejection
// nothing handled is logged and counted, and keygate serves on.

const ROOT_KEY = "root_shutdown_test_all";
const REJECTION_FIXTURE = fileURLToPath(new URL("../../../test/fixtures/background-rejection.mjs", import.meta.url));

/** An upstream that holds every request until released, then answers 200 with the request's path as its body. */
interface HeldUpstream {
  url: string;
  arrived(): number;
  release(): void;
}

async function heldUpstream(t: Test): Promise<HeldUpstream> {
  const held: { response: ServerResponse; path: string }[] = [];
  let arrived = 0;
  let released = false;
  const answer = ({ response, path }: { response: ServerResponse; path: string }) => response.end(`answered ${path}`);
  const server = createServer((request, response) => {
    arrived++;
    const entry = { response, path: request.url ?? "/" };
    if (released) answer(entry);
    else held.push(entry);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    arrived: () => arrived,
    release: () => {
      released = true;
      for (const entry of held.splice(0)) answer(entry);
    },
  };
}

/** A keygate process with one public route, /svc, to `upstream`; `yaml` is added to its configuration. */
async function keygate(t: Test, upstream: string, yaml: string, env: Record<string, string> = {}): Promise<RunningServer> {
  const directory = mkdtempSync(join(tmpdir(), "keygate-shutdown-"));
  t.teardown(() => rmSync(directory, { recursive: true, force: true }));
  const path = join(directory, "keygate.yaml");
  writeFileSync(
    path,
    [
      `rootKeys:\n  - { key: "${ROOT_KEY}", workspaceId: ws_shutdown, permissions: ["*"] }`,
      "analytics: { engine: off }",
      `routes:\n  - { name: svc, match: { prefix: /svc }, upstream: "${upstream}", workspaceId: ws_shutdown }`,
      yaml,
      "",
    ].join("\n"),
  );
  return startServer(t, { KEYGATE_CONFIG: path, ...env }, 30_000);
}

/** keygate with two workers on Redis (workers share their stores there), closing within `shutdownTimeoutMs`. */
function keygateWithWorkers(t: Test, upstream: string, shutdownTimeoutMs: number): Promise<RunningServer> {
  const prefix = uniquePrefix(t, "shutdown");
  const redis = `storage:\n  redis: { url: "${REDIS_URL}", prefix: "${prefix}" }`;
  return keygate(t, upstream, `server: { workers: 2, shutdownTimeoutMs: ${shutdownTimeoutMs} }\n${redis}`);
}

const exited = (server: RunningServer) =>
  new Promise<number | null>((resolve) => {
    if (server.child.exitCode !== null) resolve(server.child.exitCode);
    else server.child.once("exit", (code) => resolve(code));
  });

const logged = (server: RunningServer, message: RegExp) =>
  waitFor(`the log line ${message}`, 20_000, () => server.logLines().find((line) => message.test(String(line.msg))));

t.test("SIGTERM under load: every request in flight is answered, new ones are refused, and the process exits 0", async (t) => {
  const upstream = await heldUpstream(t);
  const server = await keygate(t, upstream.url, "server: { shutdownTimeoutMs: 20000 }");
  const requests = Array.from({ length: 20 }, (_, index) =>
    fetch(`${server.baseUrl}/svc/${index}`).then(async (response) => ({ status: response.status, body: await response.text() })),
  );
  const management = post(server.baseUrl, "apis.createApi", ROOT_KEY, { name: "before-the-signal" });
  await waitFor("every request has reached the upstream", 10_000, () => (upstream.arrived() === 20 ? true : undefined));
  t.equal((await management).status, 200);

  const exit = exited(server);
  server.child.kill("SIGTERM");
  await logged(server, /^closing: finishing the requests in flight/);
  const late = await fetch(`${server.baseUrl}/svc/late`).then(
    (response) => response.status,
    () => "refused",
  );
  t.ok(late === 503 || late === "refused", `a request after the signal is refused (${late})`);

  upstream.release();
  const answers = await Promise.all(requests);
  t.same(
    answers,
    answers.map((_, index) => ({ status: 200, body: `answered /svc/${index}` })),
    "each of the 20 requests in flight got its whole answer",
  );
  t.equal(await within(20_000, "the process exiting", exit), 0, "then the process exits 0, before its deadline");
  const messages = server.logLines().map((line) => String(line.msg));
  t.ok(messages.some((message) => message.startsWith("closed: every request answered")));
  t.notOk(
    messages.some((message) => message.endsWith("exiting now")),
    "nothing was cut",
  );
});

t.test("past server.shutdownTimeoutMs the process exits 1 at once, saying what it cut", async (t) => {
  const upstream = await heldUpstream(t);
  const server = await keygate(t, upstream.url, "server: { shutdownTimeoutMs: 500 }");
  const stuck = fetch(`${server.baseUrl}/svc/stuck`).then(
    (response) => response.status,
    () => "cut",
  );
  await waitFor("the request reaching the upstream", 10_000, () => (upstream.arrived() === 1 ? true : undefined));
  const exit = exited(server);
  server.child.kill("SIGTERM");
  t.equal(await within(20_000, "the process exiting", exit), 1);
  const line = server.logLines().find((each) => String(each.msg).startsWith("not closed within server.shutdownTimeoutMs (500 ms)"));
  t.equal(line?.level, 50, "an error line says the deadline passed");
  t.match(line?.cut, { requestsInFlight: 1, upgradedConnections: 0 }, "and what was cut");
  t.equal(await stuck, "cut", "the request still waiting was cut");
});

t.test("a second SIGTERM while closing exits 1 at once, saying what it cut", async (t) => {
  const upstream = await heldUpstream(t);
  const server = await keygate(t, upstream.url, "server: { shutdownTimeoutMs: 600000 }");
  void fetch(`${server.baseUrl}/svc/stuck`).catch(() => {});
  await waitFor("the request reaching the upstream", 10_000, () => (upstream.arrived() === 1 ? true : undefined));
  const exit = exited(server);
  server.child.kill("SIGTERM");
  await logged(server, /^closing: finishing the requests in flight/);
  server.child.kill("SIGTERM");
  t.equal(await within(20_000, "the process exiting", exit), 1, "long before the ten-minute deadline");
  const line = server.logLines().find((each) => String(each.msg) === "a second SIGTERM while closing: exiting now");
  t.equal(line?.level, 50);
  t.match(line?.cut, { requestsInFlight: 1 });
});

t.test("a rejection nothing handled is logged with its cause and counted, and keygate serves on", async (t) => {
  const upstream = await heldUpstream(t);
  const trigger = join(mkdtempSync(join(tmpdir(), "keygate-rejection-")), "now");
  const server = await keygate(t, upstream.url, "", {
    // Added to what tap gives a child (its coverage), not in place of it.
    NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --import=${REJECTION_FIXTURE}`.trim(),
    KEYGATE_TEST_REJECTION_TRIGGER: trigger,
  });
  const inFlight = fetch(`${server.baseUrl}/svc/across`).then((response) => response.status);
  await waitFor("the request reaching the upstream", 10_000, () => (upstream.arrived() === 1 ? true : undefined));
  writeFileSync(trigger, "");
  const line = await logged(server, /^a promise was rejected and nothing handled it/);
  t.equal(line.level, 50);
  t.match(line.err, { message: "a background task failed (test fixture)", stack: /Error: a background task failed/ }, "with its cause");
  upstream.release();
  t.equal(await inFlight, 200, "the request in flight meanwhile is answered");
  t.equal((await fetch(`${server.baseUrl}/svc/after`)).status, 200, "and new ones are served");
  t.equal((await post(server.baseUrl, "apis.createApi", ROOT_KEY, { name: "after" })).status, 200);
  const metrics = await (await fetch(`${server.baseUrl}/metrics`)).text();
  t.match(metrics, /^keygate_unhandled_rejections_total 1$/m, "counted");
  t.equal(server.child.exitCode, null, "the process is still running");
});

t.test("with workers, SIGTERM to the primary lets every worker finish its requests in flight", async (t) => {
  const upstream = await heldUpstream(t);
  const server = await keygateWithWorkers(t, upstream.url, 20_000);
  const requests = Array.from({ length: 20 }, (_, index) => fetch(`${server.baseUrl}/svc/${index}`).then((response) => response.status));
  await waitFor("every request has reached the upstream", 20_000, () => (upstream.arrived() === 20 ? true : undefined));
  const exit = exited(server);
  server.child.kill("SIGTERM");
  await logged(server, /^closing: finishing the requests in flight/);
  upstream.release();
  t.same(await Promise.all(requests), Array(20).fill(200), "each request in flight was answered");
  t.equal(await within(40_000, "the primary exiting", exit), 0);
  t.ok(server.logLines().some((line) => String(line.msg).startsWith("closed: every worker stopped")));
});

t.test("with workers, a second SIGTERM to the primary is passed on: every worker exits at once, and so does the primary", async (t) => {
  const upstream = await heldUpstream(t);
  const server = await keygateWithWorkers(t, upstream.url, 600_000);
  const stuck = Array.from({ length: 4 }, (_, index) =>
    fetch(`${server.baseUrl}/svc/${index}`).then(
      () => "answered",
      () => "cut",
    ),
  );
  await waitFor("every request has reached the upstream", 20_000, () => (upstream.arrived() === 4 ? true : undefined));
  const exit = exited(server);
  server.child.kill("SIGTERM");
  await logged(server, /^closing: finishing the requests in flight/);
  server.child.kill("SIGTERM");
  t.equal(await within(40_000, "the primary exiting", exit), 1, "long before the twenty-minute deadline");
  const line = server
    .logLines()
    .find((each) => each.role === "primary" && String(each.msg) === "a second SIGTERM while closing: exiting now");
  t.equal(line?.level, 50, "the primary says it was cut short");
  t.match(line?.cut, { workers: Number }, "and how many workers were still running");
  t.same(await Promise.all(stuck), Array(4).fill("cut"), "the requests still waiting were cut");
});
