import t from "tap";
import { createMemoryStores } from "../../src/storage/index.js";
import { MemoryRatelimitCounterStore } from "../../src/storage/memory/ratelimit-counter-store.js";
import { ManualClock } from "../helpers/clock.js";
import { storeContract } from "./contract.js";

t.test("in-memory stores meet the store contract", (t) => storeContract(t, async () => createMemoryStores()));

t.test("in-memory counters forget windows that have ended, at most once a minute", async (t) => {
  const clock = new ManualClock(0);
  const counters = new MemoryRatelimitCounterStore(clock);
  const check = { bucket: "b", limit: 5, durationMs: 1_000, cost: 1 };
  for (let i = 0; i < 3; i++) await counters.applyChecks("ws_a", [{ ...check, bucket: `b${i}` }]);
  t.equal(counters.size, 3);
  clock.advance(59_999);
  await counters.applyChecks("ws_a", [{ ...check, bucket: "late" }]);
  t.equal(counters.size, 4, "no sweep within a minute of the last");
  clock.advance(1);
  await counters.applyChecks("ws_a", [{ ...check, limit: 0 }]);
  t.equal(counters.size, 1, "then every counter whose windows have ended is dropped; the recent one stays");
});

t.test("in-memory dashboard sessions end when their time to live has passed, and a touch extends it", async (t) => {
  const clock = new ManualClock(0);
  const stores = createMemoryStores({ clock });
  const session = { id: "hash_1", rootKeyHash: "rk", workspaceId: "ws_a", csrfToken: "c", createdAt: 0, lastSeenAt: 0 };
  await stores.dashboardSessions.create(session, 1_000);
  clock.advance(999);
  t.ok(await stores.dashboardSessions.get(session.id), "alive just before");
  await stores.dashboardSessions.touch(session.id, 999, 1_000);
  clock.advance(999);
  t.ok(await stores.dashboardSessions.get(session.id), "the touch gave it another second");
  clock.advance(1);
  t.equal(await stores.dashboardSessions.get(session.id), null, "gone once its time to live has passed");
  await stores.dashboardSessions.touch(session.id, clock.now(), 1_000);
  t.equal(await stores.dashboardSessions.get(session.id), null, "and a touch does not bring it back");
});

t.test("in-memory portal codes and sessions end when their time to live has passed", async (t) => {
  const clock = new ManualClock(0);
  const stores = createMemoryStores({ clock });
  const grant = { sessionId: "ps_1", workspaceId: "ws_a", portalId: "pc_1", epoch: 0, externalId: "u", scopes: ["keys:read" as const] };
  await stores.portalSessions.createCode({ ...grant, hash: "c1", createdAt: 0, expiresAt: 1_000 }, 1_000);
  await stores.portalSessions.createSession(
    { ...grant, hash: "s1", codeHash: "c1", csrfToken: "x", createdAt: 0, expiresAt: 1_000 },
    1_000,
  );
  t.equal((await stores.portalSessions.redeemCode("c1"))?.first, true);
  clock.advance(1_000);
  t.equal(await stores.portalSessions.redeemCode("c1"), null, "an expired code is gone");
  t.equal(await stores.portalSessions.getSession("s1"), null, "an expired session is gone");
  t.equal(
    await stores.portalSessions.createCode({ ...grant, hash: "c1", createdAt: 1_000, expiresAt: 2_000 }, 1_000),
    true,
    "expired entries are swept when another is stored",
  );
  t.equal((await stores.portalSessions.redeemCode("c1"))?.first, true, "a new code under the same hash is redeemed afresh");
});
