import t from "tap";
import type { RedisBackedStores } from "../../src/storage/index.js";
import { createApi, createKey, getKey } from "../helpers/fixtures.js";
import { type Harness, harness } from "../helpers/harness.js";
import { privateRedis } from "../helpers/redis-server.js";
import { waitFor } from "../helpers/wait.js";

const BALANCE = 1_000_000;
const WORKERS = 20;

interface Tally {
  /** VALID answers decided on Redis (they report the balance). */
  decided: number;
  /** VALID answers given without counting (ratelimit.fail: open, while Redis did not answer). */
  uncounted: number;
  /** Answers of any other kind (503 while Redis did not answer). */
  other: Map<string, number>;
}

/** Verifications spending one credit each, from WORKERS loops, until stop() is called. */
function load(h: Harness, key: string): { tally: Tally; stop: () => Promise<void> } {
  const tally: Tally = { decided: 0, uncounted: 0, other: new Map() };
  let running = true;
  const worker = async () => {
    while (running) {
      const answer = await h.call("keys.verifyKey", { key });
      if (answer.status === 200 && answer.body.data.code === "VALID") {
        if (answer.body.data.credits === undefined) tally.uncounted++;
        else tally.decided++;
      } else {
        const kind = `${answer.status} ${answer.body?.data?.code ?? answer.body?.error?.type?.split("/").pop()}`;
        tally.other.set(kind, (tally.other.get(kind) ?? 0) + 1);
      }
    }
  };
  const workers = Array.from({ length: WORKERS }, worker);
  return {
    tally,
    stop: async () => {
      running = false;
      await Promise.all(workers);
    },
  };
}

for (const fail of ["closed", "open", "local"]) {
  t.test(
    `ratelimit.fail ${fail}: Redis frozen under verifications that spend credits; afterwards, credits spent = VALID answers decided on Redis`,
    async (t) => {
      const server = await privateRedis(t);
      const h = await harness(t, {
        storage: "redis",
        config: {
          storage: {
            redis: {
              url: server.url,
              prefix: "kgtest:freeze-credits",
              commandTimeoutMs: 200,
              connectTimeoutMs: 2_000,
              breaker: { failureThreshold: 3, openMs: 200 },
            },
          },
          ratelimit: { fail },
        },
      });
      const apiId = await createApi(h);
      const { key, keyId } = await createKey(h, apiId, { credits: { remaining: BALANCE } });
      t.equal((await h.call("keys.verifyKey", { key })).body.data.credits, BALANCE - 1, "the key is cached, one credit spent");
      const breaker = h.app.stores.health;
      const counters = (h.app.stores as RedisBackedStores).ratelimitBatches;

      const { tally, stop } = load(h, key);
      await waitFor("200 verifications are decided before the freeze", 30_000, () => (tally.decided >= 200 ? true : undefined));
      server.hang();
      t.teardown(() => server.resume());
      await waitFor("the breaker opens", 30_000, () => (breaker?.state !== "closed" ? true : undefined));
      const decidedBeforeResume = tally.decided;
      server.resume();
      await waitFor("200 more verifications are decided on Redis again", 30_000, () =>
        breaker?.state === "closed" && tally.decided >= decidedBeforeResume + 200 ? true : undefined,
      );
      await stop();
      await waitFor("every missed call is reconciled", 30_000, () => (counters.pendingReconciliations === 0 ? true : undefined));

      const spent = BALANCE - 1 - (await getKey(h, keyId)).credits.remaining;
      const others = [...tally.other].map(([kind, count]) => `${count} × ${kind}`).join(", ");
      t.ok(
        tally.other.size > 0 || tally.uncounted > 0,
        `Redis was missed: ${tally.uncounted} VALID without counting; ${others || "no other answers"}`,
      );
      const { settled, cancelled, creditsGivenBack } = counters.reconciliation;
      t.ok(
        settled > 0,
        `calls whose answers were missed were reconciled: ${settled} executions, ${cancelled} of them cancelled, ${creditsGivenBack} credits given back`,
      );
      t.equal(spent, tally.decided, `credits spent (${spent}) = VALID answers decided on Redis (${tally.decided})`);
    },
  );
}
