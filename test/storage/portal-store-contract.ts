import type { Test } from "tap";
import type { Stores } from "../../src/storage/interfaces.js";
import type { PortalCodeRecord, PortalRecord, PortalSessionRecord } from "../../src/storage/portal-records.js";

function portal(id: string, fields: Partial<PortalRecord> = {}): PortalRecord {
  return {
    id,
    workspaceId: "ws_a",
    slug: id.replace("_", "-"),
    displayName: id,
    mapping: { type: "keyspace", id: `api_${id}` },
    enabled: true,
    epoch: 0,
    createdAt: 1,
    ...fields,
  };
}

const grant = {
  sessionId: "ps_1",
  workspaceId: "ws_a",
  portalId: "pc_1",
  epoch: 0,
  externalId: "user_1",
  scopes: ["keys:read" as const],
};

/**
 * The PortalStore and PortalSessionStore part of the store contract (see contract.ts): the portals as one list
 * changed atomically; codes redeemed once however many try at once; sessions stored by hash.
 */
export async function portalStoreContract(t: Test, open: (t: Test) => Promise<Stores>): Promise<void> {
  await t.test("portals: the list starts empty, is changed whole, and a change that returns no list writes nothing", async (t) => {
    const { portals } = await open(t);
    t.same(await portals.all(), []);
    const one = portal("pc_1", { logoUrl: "https://x.test/l.png", keyDefaults: { prefix: "p", credits: { remaining: 3 } } });
    t.equal(await portals.update((current) => ({ portals: [...current, one], result: "added" })), "added");
    t.same(await portals.all(), [one]);
    const read = await portals.all();
    (read[0] as PortalRecord).displayName = "changed";
    t.equal((await portals.all())[0]?.displayName, "pc_1", "a returned list is a copy");
    t.equal(await portals.update(() => ({ result: 7 })), 7);
    t.same(await portals.all(), [one]);
    await t.rejects(
      portals.update(() => {
        throw new Error("refused");
      }),
      /refused/,
    );
    t.same(await portals.all(), [one], "a change that throws writes nothing");
  });

  await t.test("portals: concurrent changes all land", async (t) => {
    const { portals } = await open(t);
    await Promise.all(
      Array.from({ length: 10 }, (_, n) => portals.update((current) => ({ portals: [...current, portal(`pc_${n}`)], result: undefined }))),
    );
    t.same((await portals.all()).map((p) => p.id).sort(), Array.from({ length: 10 }, (_, n) => `pc_${n}`).sort());
  });

  await t.test("portal codes: stored once per hash, redeemed first by exactly one caller", async (t) => {
    const { portalSessions } = await open(t);
    const code: PortalCodeRecord = { ...grant, hash: "code_hash", returnUrl: "https://app.test", createdAt: 1_000, expiresAt: 901_000 };
    t.equal(await portalSessions.redeemCode("code_hash"), null);
    t.equal(await portalSessions.createCode(code, 60_000), true);
    t.equal(await portalSessions.createCode({ ...code, externalId: "other" }, 60_000), false);
    const attempts = await Promise.all(Array.from({ length: 8 }, () => portalSessions.redeemCode("code_hash")));
    t.equal(attempts.filter((a) => a?.first).length, 1, "one first redemption");
    for (const attempt of attempts) t.same(attempt?.code, code);
  });

  await t.test("portal sessions: stored once per hash, read back, deleted", async (t) => {
    const { portalSessions } = await open(t);
    const session: PortalSessionRecord = {
      ...grant,
      hash: "tok_hash",
      codeHash: "code_hash",
      csrfToken: "csrf",
      createdAt: 1,
      expiresAt: 2,
    };
    t.equal(await portalSessions.getSession("tok_hash"), null);
    t.equal(await portalSessions.createSession(session, 60_000), true);
    t.equal(await portalSessions.createSession({ ...session, csrfToken: "x" }, 60_000), false);
    t.same(await portalSessions.getSession("tok_hash"), session);
    await portalSessions.deleteSession("tok_hash");
    t.equal(await portalSessions.getSession("tok_hash"), null);
  });
}
