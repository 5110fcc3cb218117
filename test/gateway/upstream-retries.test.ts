import type { AddressInfo } from "node:net";
import t from "tap";
import { createKey } from "../helpers/fixtures.js";
import { harness } from "../helpers/harness.js";
import { startTarget, type Target } from "../helpers/targets.js";

const API = "api_gateway_retries";

type Teardown = Parameters<typeof harness>[0];

interface Load {
  gets: number[];
  /** Each POST's body and status. */
  posts: { body: string; status: number }[];
}

/** A pool of `targets` behind /pool, and a load of GETs and POSTs (each POST body unique) sent `concurrency` at a time. */
async function underLoad(t: Teardown, targets: Target[], during: (sent: number) => void): Promise<Load> {
  const h = await harness(t, {
    config: {
      apis: [{ id: API, name: "retries", workspaceId: "ws_test" }],
      routes: [{ name: "pool", match: { prefix: "/pool" }, upstream: { targets: targets.map(({ url }) => ({ url })) }, apiId: API }],
    },
  });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  const { key } = await createKey(h, API);
  const load: Load = { gets: [], posts: [] };
  const total = 300;
  let next = 0;
  const worker = async () => {
    while (next < total) {
      const index = next++;
      during(index);
      const post = index % 3 === 0;
      const body = `post-${index}`;
      let status: number;
      try {
        const response = await fetch(`${base}/pool/x`, {
          method: post ? "POST" : "GET",
          headers: { authorization: `Bearer ${key}` },
          ...(post ? { body } : {}),
        });
        await response.arrayBuffer();
        status = response.status;
      } catch {
        status = 0;
      }
      if (post) load.posts.push({ body, status });
      else load.gets.push(status);
    }
  };
  await Promise.all(Array.from({ length: 20 }, worker));
  return load;
}

function tally(statuses: number[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const status of statuses) counts[status] = (counts[status] ?? 0) + 1;
  return counts;
}

t.test("a target killed under load: every idempotent request answered, no POST body sent twice", async (t) => {
  const [a, b] = [await startTarget(t, "a"), await startTarget(t, "b")];
  let killed = false;
  const load = await underLoad(t, [a, b], (sent) => {
    if (sent === 60 && !killed) {
      killed = true;
      void b.kill();
    }
  });
  t.same(tally(load.gets), { 200: load.gets.length }, "every GET answered 200: those b could not take went to a");
  const received = [...a.bodies, ...b.bodies];
  t.equal(new Set(received).size, received.length, "no POST body reached the targets twice");
  const problems = load.posts.flatMap(({ body, status }) => {
    if (status !== 200) return status === 502 ? [] : [`${body} got ${status}`];
    return received.includes(body) ? [] : [`${body} answered 200 but not received`];
  });
  t.same(problems, [], "each POST answered 200 was received; any other got 502, never a broken connection");
  t.ok(b.count("GET") + b.count("POST") > 0, "b took requests before it was killed");
});

t.test("a target that resets each request once it has it: GETs go to the other target, POSTs are never sent again", async (t) => {
  const [a, b] = [await startTarget(t, "a"), await startTarget(t, "b")];
  b.mode = "reset";
  const load = await underLoad(t, [a, b], () => {});
  t.same(tally(load.gets), { 200: load.gets.length }, "every GET answered 200 (retried on a when b reset it)");
  const failed = load.posts.filter(({ status }) => status !== 200);
  t.same(tally(failed.map(({ status }) => status)), failed.length > 0 ? { 502: failed.length } : {}, "a POST b reset got 502");
  t.same(failed.map(({ body }) => body).sort(), [...b.bodies].sort(), "exactly the POSTs whose body b had failed: none was sent on");
  t.same(
    load.posts
      .filter(({ status }) => status === 200)
      .map(({ body }) => body)
      .sort(),
    [...a.bodies].sort(),
    "the rest went to a, once",
  );
  t.ok(b.bodies.length > 0, "b had POSTs before it was ejected");
});
