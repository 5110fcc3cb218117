import type { AddressInfo } from "node:net";
import t from "tap";
import WebSocket from "ws";
import { ManualClock } from "../helpers/clock.js";
import { createKey, getKey } from "../helpers/fixtures.js";
import { type Harness, harness } from "../helpers/harness.js";
import { parseScrape } from "../helpers/metrics.js";
import { freePort } from "../helpers/ports.js";
import { startTarget, type Target } from "../helpers/targets.js";
import { startUpstream } from "../helpers/upstream.js";
import { waitFor } from "../helpers/wait.js";

const API = "api_gateway_pools";

type Teardown = Parameters<typeof harness>[0];

interface Gateway {
  h: Harness;
  key: string;
  keyId: string;
  /** A request through the route at /pool<path>. */
  send(path: string, init?: { method?: string; body?: string }): Promise<{ status: number; body: string }>;
  /** getRoute's upstreamHealth of the route. */
  health(): Promise<any[]>;
}

async function gateway(t: Teardown, upstream: unknown, options: { clock?: ManualClock; credits?: number } = {}): Promise<Gateway> {
  const h = await harness(t, {
    ...(options.clock ? { clock: options.clock } : {}),
    config: {
      apis: [{ id: API, name: "pools", workspaceId: "ws_test" }],
      routes: [{ name: "pool", match: { prefix: "/pool" }, upstream, apiId: API, ...(options.credits ? { credits: { cost: 1 } } : {}) }],
    },
  });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  const { key, keyId } = await createKey(h, API, options.credits ? { credits: { remaining: options.credits } } : {});
  return {
    h,
    key,
    keyId,
    async send(path, init = {}) {
      const response = await fetch(`${base}/pool${path}`, {
        method: init.method ?? "GET",
        headers: { authorization: `Bearer ${key}` },
        ...(init.body !== undefined ? { body: init.body } : {}),
      });
      return { status: response.status, body: await response.text() };
    },
    async health() {
      const result = await h.call("keygate.getRoute", { route: "pool" });
      return result.body.data.upstreamHealth;
    },
  };
}

function targetsOf(...targets: Target[]): { url: string }[] {
  return targets.map(({ url }) => ({ url }));
}

t.test("smooth weighted round-robin shares requests exactly by weight", async (t) => {
  const [a, b] = [await startTarget(t, "a"), await startTarget(t, "b")];
  const g = await gateway(t, { targets: [{ url: a.url, weight: 3 }, { url: b.url }] });
  const answers: string[] = [];
  for (let i = 0; i < 40; i++) answers.push((await g.send("/x")).body);
  t.equal(a.count("GET"), 30, "three requests in four went to the target of weight 3");
  t.equal(b.count("GET"), 10, "one in four to the target of weight 1");
  t.same(answers.slice(0, 4), ["a", "a", "b", "a"], "interleaved, as nginx's smooth weighted round-robin");
});

t.test("least-connections sends to the target with fewer calls in flight", async (t) => {
  const [a, b] = [await startTarget(t, "a"), await startTarget(t, "b")];
  const g = await gateway(t, { targets: targetsOf(a, b), balance: "least-connections" });
  const held = g.send("/hold");
  await waitFor("the held request reached a target", 10_000, () => (a.held() + b.held() === 1 ? true : undefined));
  const busy = a.held() === 1 ? a : b;
  const idle = busy === a ? b : a;
  for (let i = 0; i < 5; i++) t.equal((await g.send("/x")).body, idle.name, "the idle target answers");
  t.equal(idle.count("GET"), 5, "every request while the other was busy went to the idle target");
  t.same(
    (await g.health()).map((target: any) => target.inFlight),
    busy === a ? [1, 0] : [0, 1],
    "getRoute shows the call in flight",
  );
  busy.release();
  t.equal((await held).status, 200, "the held request is answered once released");
});

t.test("a target that refuses connections is ejected, shown so, and back after its cool-down", async (t) => {
  const clock = new ManualClock();
  const a = await startTarget(t, "a");
  const port = await freePort();
  const down = `http://127.0.0.1:${port}`;
  const g = await gateway(
    t,
    { targets: [{ url: a.url }, { url: down }], health: { passive: { failures: 2, cooldownMs: 60_000 } } },
    { clock },
  );

  t.equal((await g.send("/x")).status, 200);
  t.equal(
    (await g.send("/x", { method: "POST", body: "once" })).status,
    200,
    "a POST whose connection was refused is retried (nothing of it was sent)",
  );
  for (let i = 0; i < 4; i++) t.equal((await g.send("/x")).status, 200, "answered: a refused connection is retried on the other target");
  t.same(a.bodies, ["once"], "the live target got the POST once");
  const [, ejected] = await g.health();
  t.match(ejected, { url: `${down}/`, healthy: false, failures: 2, ejections: 1, ejectedUntil: clock.now() + 60_000 });
  const scrape = parseScrape((await g.h.app.inject({ method: "GET", url: "/metrics" })).body);
  t.equal(scrape.value("keygate_upstream_target_healthy", { route: "pool", target: `${down}/` }), 0, "the metric shows it out");
  t.equal(scrape.value("keygate_upstream_target_healthy", { route: "pool", target: `${a.url}/` }), 1, "and the other in");
  t.equal(scrape.value("keygate_upstream_target_ejections_total", { route: "pool", target: `${down}/` }), 1);

  const before = a.count("GET");
  for (let i = 0; i < 4; i++) await g.send("/x");
  t.equal(a.count("GET"), before + 4, "while ejected, every request goes to the other target, at once");

  const b = await startTarget(t, "b", port);
  clock.advance(59_999);
  await g.send("/x");
  t.equal(b.count("GET"), 0, "not tried before its cool-down ends");
  clock.advance(1);
  const answers = [];
  for (let i = 0; i < 4; i++) answers.push((await g.send("/x")).body);
  t.ok(b.count("GET") >= 1, "after its cool-down it is tried, and answers");
  t.match(await g.health(), [{ healthy: true }, { healthy: true, failures: 0 }], "one success brought it back");
  t.same(answers.slice(-2).sort(), ["a", "b"], "both targets share the load again");
});

t.test("a target that fails its trial after the cool-down is ejected again at once", async (t) => {
  const clock = new ManualClock();
  const a = await startTarget(t, "a");
  const down = `http://127.0.0.1:${await freePort()}`;
  const g = await gateway(
    t,
    { targets: [{ url: a.url }, { url: down }], health: { passive: { failures: 3, cooldownMs: 1_000 } } },
    { clock },
  );
  for (let i = 0; i < 6; i++) await g.send("/x");
  t.equal((await g.health())[1].ejections, 1, "ejected after three failures");
  clock.advance(1_000);
  for (let i = 0; i < 2; i++) t.equal((await g.send("/x")).status, 200, "a failed trial fails over to the live target");
  const [, again] = await g.health();
  t.match(again, { healthy: false, ejections: 2, ejectedUntil: clock.now() + 1_000 }, "one failed trial ejects it again");
});

t.test("when every target is out: 503 no_healthy_upstream in the envelope, credits given back", async (t) => {
  const clock = new ManualClock();
  const downs = [`http://127.0.0.1:${await freePort()}`, `http://127.0.0.1:${await freePort()}`];
  const g = await gateway(t, { targets: downs.map((url) => ({ url })), health: { passive: { failures: 1 } } }, { clock, credits: 5 });
  const first = await g.send("/x");
  t.equal(first.status, 502, "both refused: the retry failed too");
  t.match(JSON.parse(first.body), { error: { type: /upstream_unreachable$/ } });
  const second = await g.send("/x");
  t.equal(second.status, 503, "then both are ejected: refused at once, no hang");
  t.match(JSON.parse(second.body), {
    meta: { requestId: String },
    error: { type: /\/no_healthy_upstream$/, status: 503, title: "Service Unavailable" },
  });
  t.equal((await getKey(g.h, g.keyId)).credits.remaining, 5, "every credit came back");
});

t.test("a status in retry.statuses is retried for GET on another target, never for POST", async (t) => {
  const [a, b] = [await startTarget(t, "a"), await startTarget(t, "b")];
  a.status = 503;
  const g = await gateway(t, { targets: targetsOf(a, b), retry: { statuses: [503] } });
  const gets = [];
  for (let i = 0; i < 4; i++) gets.push(await g.send("/x"));
  t.same(
    gets.map(({ status, body }) => `${status} ${body}`),
    ["200 b", "200 b", "200 b", "200 b"],
    "every GET answered by b: a's 503 went no further than keygate",
  );
  t.equal(a.count("GET"), 2, "a had its share of GETs");
  t.equal(b.count("GET"), 4, "b its own and a's");
  const posts = [];
  for (let i = 0; i < 4; i++) posts.push((await g.send("/x", { method: "POST", body: `p${i}` })).status);
  t.same(posts.sort(), [200, 200, 503, 503], "a POST's 503 is passed on");
  t.equal(a.count("POST") + b.count("POST"), 4, "each POST was sent once");
  t.equal(new Set([...a.bodies, ...b.bodies]).size, 4, "no POST body twice");

  b.status = 503;
  t.equal((await g.send("/x")).status, 503, "the retry's own 503 is passed on: one retry");
});

t.test("active probes take a target out and bring it back", async (t) => {
  const [a, b] = [await startTarget(t, "a"), await startTarget(t, "b")];
  const g = await gateway(t, {
    targets: targetsOf(a, b),
    health: { active: { path: "/health", intervalMs: 100, healthyThreshold: 2, unhealthyThreshold: 2, statuses: [200] } },
  });
  b.healthStatus = 500;
  await waitFor("the probes took b out", 20_000, async () => ((await g.health())[1].probedHealthy === false ? true : undefined));
  const before = b.count("GET");
  for (let i = 0; i < 4; i++) t.equal((await g.send("/x")).body, "a", "a answers while b is out");
  t.equal(b.count("GET"), before, "b gets no request");
  t.match((await g.health())[1], { healthy: false, probedHealthy: false });
  b.healthStatus = 200;
  await waitFor("the probes brought b back", 20_000, async () => ((await g.health())[1].healthy === true ? true : undefined));
  const answers = [];
  for (let i = 0; i < 2; i++) answers.push((await g.send("/x")).body);
  t.same(answers.sort(), ["a", "b"], "b takes requests again");
});

t.test("a single URL upstream shows no pool state", async (t) => {
  const a = await startTarget(t, "a");
  const g = await gateway(t, a.url);
  t.equal((await g.send("/x")).body, "a");
  t.equal(await g.health(), undefined);
});

t.test("a target's state survives a route table swap while its route's upstream stays the same", async (t) => {
  const clock = new ManualClock();
  const a = await startTarget(t, "a");
  const down = `http://127.0.0.1:${await freePort()}`;
  const h = await harness(t, { clock, config: { apis: [{ id: API, name: "pools", workspaceId: "ws_test" }] } });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  const upstream = { targets: [{ url: a.url }, { url: down }], health: { passive: { failures: 1 } } };
  const policies = [{ name: "auth", enabled: true, keyauth: { keyspaces: [API] } }];
  t.equal((await h.call("keygate.createRoute", { name: "stored", match: { prefix: "/stored" }, upstream, policies })).status, 200);
  const { key } = await createKey(h, API);
  for (let i = 0; i < 2; i++) await fetch(`${base}/stored/x`, { headers: { authorization: `Bearer ${key}` } });
  const ejected = async () => (await h.call("keygate.getRoute", { route: "stored" })).body.data.upstreamHealth[1].healthy === false;
  t.ok(await ejected(), "ejected");

  t.equal((await h.call("keygate.createRoute", { name: "other", match: { prefix: "/other" }, upstream: a.url })).status, 200);
  t.ok(await ejected(), "still ejected after another route's change swapped the table");
  t.equal((await h.call("keygate.updateRoute", { route: "stored", timeoutMs: 5_000 })).status, 200);
  t.ok(await ejected(), "and after a change of the route that leaves its upstream as it was");
  t.equal((await h.call("keygate.updateRoute", { route: "stored", upstream: { ...upstream, balance: "least-connections" } })).status, 200);
  t.notOk(await ejected(), "a changed upstream starts afresh");
  const shown = async () =>
    (await h.app.inject({ method: "GET", url: "/metrics" })).body.includes('keygate_upstream_target_healthy{route="stored"');
  t.ok(await shown(), "the route's targets are in the metrics");
  t.equal((await h.call("keygate.deleteRoute", { route: "stored" })).status, 200);
  t.notOk(await shown(), "a deleted route's targets leave the metrics");
});

t.test("a WebSocket upgrade goes to a healthy target of the pool; with none, 503 in the envelope", async (t) => {
  const clock = new ManualClock();
  const upstream = await startUpstream(t);
  const down = `http://127.0.0.1:${await freePort()}`;
  const g = await gateway(t, { targets: [{ url: down }, { url: upstream.url }], health: { passive: { failures: 1 } } }, { clock });
  t.equal((await g.send("/x")).status, 200, "a first request finds the first target down and is retried");
  t.match((await g.health())[0], { healthy: false }, "the down target is ejected");
  const base = `ws://127.0.0.1:${(g.h.app.server.address() as AddressInfo).port}/pool/ws`;
  for (let i = 0; i < 3; i++) {
    const echoed = await new Promise<string>((resolve, reject) => {
      const socket = new WebSocket(base, { headers: { authorization: `Bearer ${g.key}` } });
      socket.once("open", () => socket.send(`hello ${i}`));
      socket.once("message", (message) => {
        resolve(message.toString());
        socket.close();
      });
      socket.once("error", reject);
    });
    t.equal(echoed, `echo:hello ${i}`, "relayed to the healthy target");
  }

  await upstream.close();
  t.equal((await g.send("/x")).status, 502, "the last target refuses too, and is ejected");
  const refused = await new Promise<{ status: number; body: any }>((resolve, reject) => {
    const socket = new WebSocket(base, { headers: { authorization: `Bearer ${g.key}` } });
    socket.once("unexpected-response", (_request, response) => {
      let text = "";
      response.on("data", (chunk: Buffer) => (text += chunk.toString()));
      response.on("end", () => resolve({ status: response.statusCode ?? 0, body: JSON.parse(text) }));
    });
    socket.once("open", () => reject(new Error("opened")));
  });
  t.match(refused, { status: 503, body: { error: { type: /no_healthy_upstream$/ } } });
});

t.test("with on5xx, 5xx answers count as failures and eject the target", async (t) => {
  const clock = new ManualClock();
  const [a, b] = [await startTarget(t, "a"), await startTarget(t, "b")];
  a.status = 500;
  const g = await gateway(t, { targets: targetsOf(a, b), health: { passive: { failures: 2, on5xx: true } } }, { clock });
  const statuses = [];
  for (let i = 0; i < 6; i++) statuses.push((await g.send("/x")).status);
  t.same(statuses, [500, 200, 500, 200, 200, 200], "a's 500s are passed on (no retry set) until a is ejected");
  t.match((await g.health())[0], { healthy: false, failures: 2, ejections: 1 });
});

t.test("an idempotent request with a streamed body is not sent again once the target may have read it", async (t) => {
  const [a, b] = [await startTarget(t, "a"), await startTarget(t, "b")];
  a.mode = "reset";
  const g = await gateway(t, { targets: targetsOf(a, b) });
  t.equal((await g.send("/x", { method: "PUT", body: "streamed" })).status, 502, "a PUT a reset: 502");
  t.same([a.bodies, b.bodies], [["streamed"], []], "its body reached a only");
  t.same([(await g.send("/x")).status, (await g.send("/x")).status], [200, 200], "a GET a reset goes to b");
  t.equal(b.count("GET"), 2);
});

t.test("a request retried on another target spends its credits once", async (t) => {
  const a = await startTarget(t, "a");
  const down = `http://127.0.0.1:${await freePort()}`;
  const g = await gateway(t, { targets: [{ url: down }, { url: a.url }] }, { credits: 5 });
  t.equal((await g.send("/x")).body, "a", "refused by the first target, answered by the second");
  t.equal((await g.send("/x")).body, "a");
  t.equal((await getKey(g.h, g.keyId)).credits.remaining, 3, "one credit per request, whatever the attempts");
});
