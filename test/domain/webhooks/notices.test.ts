import t from "tap";
import type { IdentityService } from "../../../src/domain/identities/identity-service.js";
import { postKeyNotice } from "../../../src/domain/keys/key-notices.js";
import type { Notice, NoticeSink } from "../../../src/domain/notices.js";
import { ExceededNotices } from "../../../src/domain/ratelimit/exceeded-notices.js";
import type { LimitDecision } from "../../../src/domain/ratelimit/limit-decision.js";
import { guardedLookup } from "../../../src/http/guarded-connections.js";

const check = { bucket: "b", limit: 2, durationMs: 1_000, cost: 1 };

function namespaceDecision(identifier: string, passed: boolean, resetAt: number): LimitDecision {
  return { kind: "namespace", name: "api", namespaceId: "rlns_1", identifier, check, passed, remaining: 0, resetAt };
}

t.test("ratelimit.exceeded is posted for a denying namespace limit, once per window on an instance", async (t) => {
  const posted: Notice[] = [];
  const notices = new ExceededNotices(recordingSink(posted));
  const keyLimit: LimitDecision = {
    kind: "key",
    id: "rl_1",
    name: "requests",
    autoApply: true,
    check,
    passed: false,
    remaining: 0,
    resetAt: 5,
  };
  const subject = { workspaceId: "ws_a", apiId: "api_1", keyId: "key_1" };
  notices.note("ws_a", [keyLimit, namespaceDecision("alice", true, 1_000), namespaceDecision("bob", false, 1_000)], subject);
  notices.note("ws_a", [namespaceDecision("bob", false, 1_000)]);
  notices.note("ws_a", [namespaceDecision("bob", false, 2_000)]);
  t.same(posted, [
    {
      type: "ratelimit.exceeded",
      workspaceId: "ws_a",
      namespaceId: "rlns_1",
      namespaceName: "api",
      identifier: "bob",
      limit: 2,
      duration: 1_000,
      reset: 1_000,
      subject,
    },
    {
      type: "ratelimit.exceeded",
      workspaceId: "ws_a",
      namespaceId: "rlns_1",
      namespaceName: "api",
      identifier: "bob",
      limit: 2,
      duration: 1_000,
      reset: 2_000,
    },
  ]);
  for (let i = 0; i < 10_001; i++) notices.note("ws_a", [namespaceDecision(`id${i}`, false, 1)]);
  t.equal(posted.length, 10_003, "a full memory is forgotten, never grows past its bound");
});

t.test("key notices: nothing without a sink; an identity gone since is named by id only", async (t) => {
  const key = { id: "key_1", workspaceId: "ws_a", apiId: "api_1", identityId: "id_gone" } as Parameters<typeof postKeyNotice>[2];
  const identities = { liveById: async () => new Map() } as unknown as IdentityService;
  await postKeyNotice({ identities }, "key.deleted", key);
  const posted: Notice[] = [];
  await postKeyNotice({ identities, notices: recordingSink(posted) }, "key.deleted", key);
  t.same(posted, [{ type: "key.deleted", subject: { workspaceId: "ws_a", apiId: "api_1", keyId: "key_1", identityId: "id_gone" } }]);
});

t.test("the guarded lookup answers one address when asked for one, and passes resolution errors on", async (t) => {
  const lookup = guardedLookup(() => ({ allowsHost: () => true, allowsAddress: () => true }));
  const one = await new Promise<[unknown, unknown, unknown]>((resolve) =>
    lookup("localhost", { family: 4 }, (...args) => resolve(args as never)),
  );
  t.same(one, [null, "127.0.0.1", 4]);
  const missing = await new Promise<unknown>((resolve) => lookup("no-such-host.invalid", {}, (error) => resolve(error)));
  t.match(missing, { code: /ENOTFOUND|EAI_AGAIN/ });
});

/** A sink that keeps what it is posted in `posted`. */
function recordingSink(posted: Notice[]): NoticeSink {
  return {
    post: async (notice) => {
      posted.push(notice);
    },
    settled: async () => {},
  };
}
