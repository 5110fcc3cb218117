import t from "tap";
import type { CircuitState } from "../../src/lib/circuit-breaker.js";
import { harness } from "../helpers/harness.js";
import { privateRedis } from "../helpers/redis-server.js";
import { within } from "../helpers/wait.js";

t.test(
  "after an outage the breaker closes by its own background probe, before any request comes, and the first request succeeds",
  async (t) => {
    const server = await privateRedis(t);
    const h = await harness(t, {
      storage: "redis",
      config: {
        storage: {
          redis: {
            url: server.url,
            prefix: "kgtest:recovery",
            commandTimeoutMs: 200,
            connectTimeoutMs: 2_000,
            breaker: { failureThreshold: 3, openMs: 200 },
          },
        },
      },
    });
    const breaker = h.app.stores.health;
    t.equal((await h.call("apis.createApi", { name: "before" })).status, 200);

    await server.stop();
    for (let i = 0; i < 20 && breaker.state === "closed"; i++) {
      t.equal((await h.call("apis.createApi", { name: "during" })).status, 500, "a request during the outage fails as unavailable");
    }
    t.not(breaker.state, "closed", "the breaker opened");

    const states: CircuitState[] = [];
    breaker.onStateChange((state) => states.push(state));
    const closed = new Promise<void>((resolve) => breaker.onStateChange((state) => state === "closed" && resolve()));
    await server.start();
    // Without background probes no request would ever close it.
    await within(10_000, "the breaker closing with no request made", closed);
    t.pass("the breaker closed with no request made");
    t.ok(states.includes("probing"), `it probed in the background (${states.join(" → ")})`);

    const first = await h.call("apis.createApi", { name: "after" });
    t.equal(first.status, 200, "the first request after Redis came back succeeds");
  },
);
