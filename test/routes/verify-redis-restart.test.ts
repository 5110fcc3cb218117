import type { AddressInfo } from "node:net";
import t from "tap";
import { createKey } from "../helpers/fixtures.js";
import { harness } from "../helpers/harness.js";
import { privateRedis } from "../helpers/redis-server.js";
import { startUpstream } from "../helpers/upstream.js";
import { waitFor } from "../helpers/wait.js";

const API = "api_restart_verify";
const CYCLES = 3;

t.test(
  "a cached key with nothing to count verifies throughout Redis being killed and restarted, through keys.verifyKey and the gateway",
  async (t) => {
    const server = await privateRedis(t, { persistent: true });
    const upstream = await startUpstream(t);
    const h = await harness(t, {
      storage: "redis",
      config: {
        storage: {
          redis: {
            url: server.url,
            prefix: "kgtest:restart",
            commandTimeoutMs: 200,
            connectTimeoutMs: 2_000,
            breaker: { failureThreshold: 3, openMs: 200 },
          },
        },
        apis: [{ id: API, name: "restart", workspaceId: "ws_test" }],
        routes: [{ name: "svc", match: { prefix: "/svc" }, upstream: upstream.url, apiId: API }],
      },
    });
    await h.app.listen({ port: 0, host: "127.0.0.1" });
    const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
    const { key } = await createKey(h, API);
    // A root key from the store (not the configuration): its cache is on the path of keys.verifyKey too.
    const rootKey = await h.rootKey(["api.*.verify_key"]);
    const breaker = h.app.stores.health;
    let resyncs = 0;
    h.app.services.invalidations.listen((message) => {
      if (message.kind === "everything") resyncs++;
    });

    const answers = new Map<string, number>();
    let total = 0;
    const record = (answer: string) => {
      answers.set(answer, (answers.get(answer) ?? 0) + 1);
      total++;
    };
    const verify = async () => {
      const result = await h.call("keys.verifyKey", { key }, { rootKey });
      record(`keys.verifyKey ${result.status} ${result.body?.data?.code ?? result.body?.error?.type}`);
    };
    const proxied = async () => {
      const response = await fetch(`${base}/svc/x`, { headers: { authorization: `Bearer ${key}` } });
      const body = (await response.json()) as { url?: string; error?: { type: string } };
      record(`gateway ${response.status} ${body.url ?? body.error?.type}`);
    };
    await verify();
    await proxied();
    t.same(
      [...answers.keys()],
      ["keys.verifyKey 200 VALID", "gateway 200 /svc/x"],
      "both answer before any outage (and the key is cached)",
    );

    let running = true;
    const load = (send: () => Promise<void>) =>
      (async () => {
        while (running) {
          await send();
          // app.inject of an answer from memory can complete in microtasks alone: let timers and sockets run.
          await new Promise((resolve) => setImmediate(resolve));
        }
      })();
    const loops = [load(verify), load(proxied), load(verify), load(proxied)];
    try {
      for (let cycle = 1; cycle <= CYCLES; cycle++) {
        await server.stop();
        // Other traffic during the outage (management requests) opens the breaker, as it would in production.
        await waitFor("management requests open the breaker", 10_000, async () => {
          if (breaker.state !== "closed") return true;
          await h.call("apis.createApi", { name: "during" });
          return undefined;
        });
        const before = total;
        await waitFor("the cached key is served 20 more times during the outage", 10_000, () => (total >= before + 20 ? true : undefined));
        const resyncsBefore = resyncs;
        await server.start();
        await waitFor("the invalidation subscriber is back (it resyncs the caches)", 10_000, () =>
          resyncs > resyncsBefore ? true : undefined,
        );
        await waitFor("the breaker closes again", 10_000, () => (breaker.state === "closed" ? true : undefined));
        const after = total;
        await waitFor("40 more requests are answered after Redis came back", 10_000, () => (total >= after + 40 ? true : undefined));
        t.pass(`cycle ${cycle}: ${total} answers so far`);
      }
    } finally {
      running = false;
      await Promise.all(loops);
    }
    const unexpected = [...answers].filter(([answer]) => answer !== "keys.verifyKey 200 VALID" && answer !== "gateway 200 /svc/x");
    t.same(unexpected, [], `only VALID and the upstream's answer, across ${total} answers: ${JSON.stringify([...answers])}`);
  },
);
