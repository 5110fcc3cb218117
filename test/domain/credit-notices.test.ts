import t from "tap";
import type { Notice, NoticeSink } from "../../src/domain/notices.js";
import { ManualClock } from "../helpers/clock.js";
import { createApi, createKey } from "../helpers/fixtures.js";
import { type Harness, harness, STORAGE_KINDS, WORKSPACE } from "../helpers/harness.js";
import { waitFor } from "../helpers/wait.js";

// Credit crossings posted through the NoticeSink the verification service is given: once per crossing, by the
// verification that crossed, however many verify at once; again after a top-up; never on a denial.

/** Records the credit notices posted (key changes are posted to the same sink, and told apart by their type). */
class RecordingSink implements NoticeSink {
  readonly posted: Notice[] = [];
  async post(notice: Notice): Promise<void> {
    if (notice.type.includes(".credits.")) this.posted.push(notice);
  }
  async settled(): Promise<void> {}
  /** What was posted since the last call. */
  take(): Notice[] {
    return this.posted.splice(0);
  }
}

const verify = async (h: Harness, key: string, cost?: number) =>
  (await h.call("keys.verifyKey", cost === undefined ? { key } : { key, credits: { cost } })).body.data;

for (const storage of STORAGE_KINDS) {
  t.test(`credit notices on ${storage} stores`, async (t) => {
    const sink = new RecordingSink();
    const h = await harness(t, { storage, clock: new ManualClock(Date.UTC(2026, 5, 1)), notices: sink });
    const apiId = await createApi(h);

    await t.test("an identity's balance shared by three keys: low once, exhausted once, with concurrent verifications", async (t) => {
      const externalId = `team_${storage}`;
      const identityId = (await h.call("identities.createIdentity", { externalId, credits: { remaining: 20, lowThreshold: 5 } })).body.data
        .identityId as string;
      const keys = [
        await createKey(h, apiId, { externalId }),
        await createKey(h, apiId, { externalId }),
        await createKey(h, apiId, { externalId }),
      ];
      const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => verify(h, (keys[i % 3] as { key: string }).key)));
      t.equal(answers.filter((answer) => answer.valid).length, 20, "exactly the balance was spent");
      const posted = sink.take();
      t.same(
        posted.map((notice) => notice.type),
        ["identity.credits.low", "identity.credits.exhausted"],
        "each crossing posted once, in order",
      );
      t.match(posted[0], { remaining: 5, threshold: 5 });
      t.match(posted[1], { remaining: 0, threshold: 5 });
      for (const notice of posted) {
        const subject = (notice as unknown as { subject: Record<string, string> }).subject;
        t.same(Object.keys(subject).sort(), ["apiId", "externalId", "identityId", "keyId", "workspaceId"]);
        t.match(subject, { workspaceId: WORKSPACE, apiId, identityId, externalId });
        t.ok(
          keys.some((key) => key.keyId === subject.keyId),
          "the key whose verification crossed",
        );
        t.notOk(JSON.stringify(notice).includes((keys[0] as { key: string }).key), "never the key itself");
      }

      await Promise.all(Array.from({ length: 10 }, (_, i) => verify(h, (keys[i % 3] as { key: string }).key)));
      t.same(sink.take(), [], "denials post nothing");

      await h.call("keygate.updateIdentityCredits", { identity: identityId, operation: "increment", value: 8 });
      await Promise.all(Array.from({ length: 12 }, (_, i) => verify(h, (keys[i % 3] as { key: string }).key)));
      t.same(
        sink.take().map((notice) => notice.type),
        ["identity.credits.low", "identity.credits.exhausted"],
        "a top-up and a new crossing post again",
      );
    });

    await t.test("a key's own balance: a cost that jumps past the threshold, then to 0; cost 0 and denials post nothing", async (t) => {
      const { key, keyId } = await createKey(h, apiId, { credits: { remaining: 10, lowThreshold: 4 } });
      await verify(h, key, 0);
      t.same(sink.take(), [], "a check that spends nothing crosses nothing");
      t.equal((await verify(h, key, 3)).credits, 7);
      t.same(sink.take(), [], "still above the threshold");
      t.equal((await verify(h, key, 6)).credits, 1);
      t.same(sink.take(), [{ type: "key.credits.low", subject: { workspaceId: WORKSPACE, apiId, keyId }, remaining: 1, threshold: 4 }]);
      t.equal((await verify(h, key, 5)).code, "USAGE_EXCEEDED");
      t.same(sink.take(), [], "a denied verification posts nothing");
      t.equal((await verify(h, key, 1)).credits, 0);
      t.same(sink.take(), [
        { type: "key.credits.exhausted", subject: { workspaceId: WORKSPACE, apiId, keyId }, remaining: 0, threshold: 4 },
      ]);
    });

    await t.test("without a threshold only exhaustion posts; a key of an identity names it", async (t) => {
      const externalId = `solo_${storage}`;
      await h.call("identities.createIdentity", { externalId });
      const { key, keyId } = await createKey(h, apiId, { externalId, credits: { remaining: 2 } });
      await verify(h, key);
      t.same(sink.take(), []);
      await verify(h, key);
      const [exhausted] = sink.take();
      t.match(exhausted, { type: "key.credits.exhausted", remaining: 0, subject: { keyId, externalId } });
      t.notOk("threshold" in (exhausted as object));
    });

    await t.test("a threshold at 0: low and exhausted on the same verification", async (t) => {
      const { key } = await createKey(h, apiId, { credits: { remaining: 1, lowThreshold: 0 } });
      await verify(h, key);
      t.same(
        sink.take().map((notice) => notice.type),
        ["key.credits.low", "key.credits.exhausted"],
      );
    });
  });
}

/** A sink whose receipts resolve only once released: an outbox write still under way. */
class HeldSink implements NoticeSink {
  readonly posted: Notice[] = [];
  private releases: (() => void)[] = [];
  post(notice: Notice): Promise<void> {
    if (!notice.type.includes(".credits.")) return Promise.resolve();
    this.posted.push(notice);
    return new Promise((resolve) => this.releases.push(resolve));
  }
  async settled(): Promise<void> {}
  release(): void {
    for (const release of this.releases.splice(0)) release();
  }
}

t.test("a verification that crosses is answered once its notice is durable; one that crosses nothing waits for nothing", async (t) => {
  const sink = new HeldSink();
  const h = await harness(t, { notices: sink });
  const apiId = await createApi(h);
  const { key } = await createKey(h, apiId, { credits: { remaining: 3, lowThreshold: 1 } });
  t.equal((await verify(h, key)).credits, 2, "crossing nothing: answered while the sink holds every receipt");
  let answered = false;
  const crossing = verify(h, key).then((answer) => {
    answered = true;
    return answer;
  });
  await waitFor("the crossing is posted", 10_000, () => (sink.posted.length === 1 ? true : undefined));
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(answered, false, "the crossing verification waits for its notice's receipt");
  sink.release();
  t.match(await crossing, { valid: true, credits: 1 });
  t.match(sink.posted, [{ type: "key.credits.low", remaining: 1 }]);
});
