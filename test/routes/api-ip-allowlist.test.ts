import type { AddressInfo } from "node:net";
import t from "tap";
import type { VerificationEvent } from "../../src/domain/analytics/events.js";
import { recordingAnalytics } from "../helpers/analytics.js";
import { assertError, assertInvalidAt, checkPermissions, checkUnauthenticated } from "../helpers/assertions.js";
import { createApi, createKey } from "../helpers/fixtures.js";
import { harness, OTHER_ROOT_KEY, ROOT_KEY, STORAGE_KINDS, WORKSPACE } from "../helpers/harness.js";
import { startUpstream } from "../helpers/upstream.js";

const DECLARED = "api_declared_fence";

for (const storage of STORAGE_KINDS) {
  t.test(`per-API IP allowlists on ${storage} stores`, async (t) => {
    const events: VerificationEvent[] = [];
    const upstream = await startUpstream(t);
    const h = await harness(t, {
      storage,
      analytics: recordingAnalytics({ verifications: events }),
      config: {
        apis: [{ id: DECLARED, name: "declared", workspaceId: WORKSPACE, ipAllowlist: ["203.0.113.0/24"] }],
        routes: [{ name: "fenced", match: { prefix: "/fenced" }, upstream: upstream.url, apiId: DECLARED }],
        gateway: { trustProxy: ["loopback"] },
      },
    });
    const apiId = await createApi(h);
    const { key } = await createKey(h, apiId);
    /** keys.verifyKey as a caller at `address` (the connection's peer) would send it. */
    const verifyFrom = async (address: string, verified = key) => {
      const response = await h.app.inject({
        method: "POST",
        url: "/v2/keys.verifyKey",
        remoteAddress: address,
        headers: { authorization: `Bearer ${ROOT_KEY}`, "content-type": "application/json", "x-forwarded-for": "10.1.2.3" },
        payload: JSON.stringify({ key: verified }),
      });
      return response.json().data as { valid: boolean; code: string; keyId?: string };
    };
    const setAllowlist = (ipAllowlist: string[], rootKey?: string) =>
      h.call("keygate.setApiIpAllowlist", { apiId, ipAllowlist }, rootKey === undefined ? {} : { rootKey });

    await t.test("without an allowlist every address may verify; with one, only those it covers", async (t) => {
      t.equal((await verifyFrom("198.51.100.7")).code, "VALID", "and the view is now cached");
      const set = await setAllowlist(["10.0.0.0/8", "2001:db8::/32", "10.0.0.0/8"]);
      t.equal(set.status, 200, JSON.stringify(set.body.error ?? ""));
      t.same(set.body.data, { apiId, ipAllowlist: ["10.0.0.0/8", "2001:db8::/32"] }, "repeats dropped, order kept");
      t.same((await h.call("keygate.getApiIpAllowlist", { apiId })).body.data, set.body.data);

      const outside = await verifyFrom("198.51.100.7");
      t.same(outside, { ...outside, valid: false, code: "FORBIDDEN" }, "at once, though the key's view was cached");
      t.equal(outside.keyId !== undefined, true, "the key exists, so its fields are shown as for DISABLED");
      t.equal((await verifyFrom("10.20.30.40")).code, "VALID");
      t.equal((await verifyFrom("::ffff:10.20.30.40")).code, "VALID", "an IPv4 client on an IPv6 socket");
      t.equal((await verifyFrom("2001:db8::1")).code, "VALID");
      t.equal((await verifyFrom("2001:db9::1")).code, "FORBIDDEN");
      t.equal((await verifyFrom("127.0.0.1")).code, "FORBIDDEN", "keys.verifyKey trusts no X-Forwarded-For: the peer counts");
      t.equal((await verifyFrom("198.51.100.7", "not-a-key")).code, "NOT_FOUND", "an unknown key is NOT_FOUND from anywhere");

      t.same((await setAllowlist([])).body.data, { apiId, ipAllowlist: [] }, "an empty list lifts the restriction");
      t.equal((await verifyFrom("198.51.100.7")).code, "VALID");
    });

    await t.test("FORBIDDEN is recorded for analytics like every other outcome", async (t) => {
      events.length = 0;
      await setAllowlist(["10.0.0.0/8"]);
      for (const address of ["198.51.100.1", "198.51.100.2", "10.0.0.1"]) await verifyFrom(address);
      t.same(
        events.map((event) => event.outcome),
        ["FORBIDDEN", "FORBIDDEN", "VALID"],
      );
      t.ok(
        events.every((event) => event.keyId !== ""),
        "each names the key",
      );
      await setAllowlist([]);
    });

    await t.test("the gateway checks the client its trusted proxies report", async (t) => {
      await h.app.listen({ port: 0, host: "127.0.0.1" });
      const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
      const { key: fencedKey } = await createKey(h, DECLARED);
      const through = async (forwardedFor?: string) => {
        const response = await fetch(`${base}/fenced/x`, {
          headers: { authorization: `Bearer ${fencedKey}`, ...(forwardedFor ? { "x-forwarded-for": forwardedFor } : {}) },
        });
        const body = (await response.json()) as { error?: { type: string } };
        return [response.status, body.error?.type.split("/").pop()];
      };
      events.length = 0;
      t.same(await through("203.0.113.50"), [200, undefined], "the proxy at 127.0.0.1 is trusted, so its client counts");
      t.same(await through(), [403, "ip_not_allowed"], "without a forwarded client the peer counts");
      t.same(await through("203.0.113.50, 198.51.100.9"), [403, "ip_not_allowed"], "the nearest untrusted hop is the client");
      t.same(
        events.map((event) => event.outcome),
        ["VALID", "FORBIDDEN", "FORBIDDEN"],
      );
    });

    await t.test("an allowlist in the configuration applies at every start-up, [] removing it", async (t) => {
      t.same((await h.call("keygate.getApiIpAllowlist", { apiId: DECLARED })).body.data.ipAllowlist, ["203.0.113.0/24"]);
      await h.call("keygate.setApiIpAllowlist", { apiId: DECLARED, ipAllowlist: ["10.0.0.1"] });
      await h.app.services.apis.declare({ id: DECLARED, name: "declared", workspaceId: WORKSPACE, deleteProtection: false });
      t.same((await h.call("keygate.getApiIpAllowlist", { apiId: DECLARED })).body.data.ipAllowlist, ["10.0.0.1"], "absent: kept");
      await h.app.services.apis.declare({
        id: DECLARED,
        name: "declared",
        workspaceId: WORKSPACE,
        deleteProtection: false,
        ipAllowlist: ["203.0.113.0/24"],
      });
      t.same((await h.call("keygate.getApiIpAllowlist", { apiId: DECLARED })).body.data.ipAllowlist, ["203.0.113.0/24"]);
      await h.app.services.apis.declare({
        id: DECLARED,
        name: "declared",
        workspaceId: WORKSPACE,
        deleteProtection: false,
        ipAllowlist: [],
      });
      t.same((await h.call("keygate.getApiIpAllowlist", { apiId: DECLARED })).body.data.ipAllowlist, []);
    });

    await t.test("refusals: bad entries by position, unknown and other workspaces' APIs", async (t) => {
      const bad = await setAllowlist(["10.0.0.0/8", "10.0.0.0/33", "example.com"]);
      assertInvalidAt(t, bad, "body.ipAllowlist[1]", /prefix length/);
      assertInvalidAt(t, bad, "body.ipAllowlist[2]", /not an IP address/);
      t.same((await h.call("keygate.getApiIpAllowlist", { apiId })).body.data.ipAllowlist, [], "nothing stored");
      assertInvalidAt(t, await h.call("keygate.setApiIpAllowlist", { apiId }), "body.ipAllowlist");
      assertError(
        t,
        await h.call("keygate.setApiIpAllowlist", { apiId: "api_missing123", ipAllowlist: [] }),
        "err:unkey:data:api_not_found",
      );
      assertError(t, await h.call("keygate.getApiIpAllowlist", { apiId }, { rootKey: OTHER_ROOT_KEY }), "err:unkey:data:api_not_found");
    });

    await checkUnauthenticated(t, h, "keygate.setApiIpAllowlist", { apiId, ipAllowlist: [] });
    await checkPermissions(t, h, "keygate.setApiIpAllowlist", () => ({ apiId, ipAllowlist: [] }), {
      missing: ["api.*.update_api", `api.${apiId}.update_api`],
      accepted: [["api.*.update_api"], [`api.${apiId}.update_api`]],
    });
    await checkPermissions(t, h, "keygate.getApiIpAllowlist", () => ({ apiId }), {
      missing: ["api.*.read_api", `api.${apiId}.read_api`],
      accepted: [["api.*.read_api"], [`api.${apiId}.read_api`]],
    });
  });
}
