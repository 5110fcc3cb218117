import {
  BadRequestErrorResponse,
  ForbiddenErrorResponse,
  PreconditionFailedErrorResponse,
  UnauthorizedErrorResponse,
} from "@unkey/api/models/errors";
import t from "tap";
import { analyticsDir, gatewayRequestEvent, ratelimitEvent } from "../helpers/analytics.js";
import { STORAGE_KINDS } from "../helpers/harness.js";
import { rejectsWith, sdkApp } from "./helpers.js";

/**
 * analytics.getRatelimits and analytics.getGatewayRequests through the official SDK against a listening keygate:
 * the rows come back parsed by the SDK's schemas, and refusals as its typed errors. Events go straight into the
 * sinks (what rate limiting and the gateway record is their own tests' business).
 */

// chDB binds one data directory per process: both stores' apps use this one, each in a workspace of its own.
const dir = analyticsDir(t);

for (const storage of STORAGE_KINDS) {
  await t.test(`the SDK's getRatelimits and getGatewayRequests against keygate on ${storage} stores`, async (t) => {
    const { h, client } = await sdkApp(t, {
      storage,
      config: { analytics: { engine: "embedded", path: dir, query: { maxExecutionMs: 10_000, maxResultRows: 100 } } },
    });
    const workspace = `ws_sdk_families_${storage}`;
    const analyst = client(await h.rootKey(["*"], workspace));
    const apiId = (await analyst.apis.createApi({ name: "gatewayed" })).data.apiId;
    const now = Date.now();
    const { sinks } = h.app.services.analytics;
    for (let n = 0; n < 5; n++) {
      sinks.ratelimits.record(
        ratelimitEvent({
          workspaceId: workspace,
          namespaceId: "rlns_sdk",
          identifier: `user_${n % 2}`,
          passed: n !== 4,
          tokens: 2,
          time: now - n,
        }),
      );
      sinks.gatewayRequests.record(
        gatewayRequestEvent({ workspaceId: workspace, apiId, route: "orders", responseStatus: n === 4 ? 502 : 200, time: now - n }),
      );
    }
    await h.app.analytics.flush();

    await t.test("getRatelimits answers the rows", async (t) => {
      const answer = await analyst.analytics.getRatelimits({
        query:
          "SELECT identifier, sum(total) AS requests, sum(passed) AS passed, sum(total_tokens) AS tokens FROM ratelimits_per_minute_v1 GROUP BY identifier ORDER BY identifier",
      });
      t.match(answer.meta.requestId, /^req_/);
      t.same(answer.data, [
        { identifier: "user_0", requests: 3, passed: 2, tokens: 6 },
        { identifier: "user_1", requests: 2, passed: 2, tokens: 4 },
      ]);
      const raw = await analyst.analytics.getRatelimits({
        query: "SELECT namespace_id, passed, `limit` FROM ratelimits_v1 WHERE identifier = 'user_0' ORDER BY time DESC LIMIT 1",
      });
      t.same(raw.data, [{ namespace_id: "rlns_sdk", passed: true, limit: 10 }]);
    });

    await t.test("getGatewayRequests answers the rows", async (t) => {
      const answer = await analyst.analytics.getGatewayRequests({
        query:
          "SELECT app_id, api_id, response_status, count() AS total FROM gateway_requests_v1 GROUP BY app_id, api_id, response_status ORDER BY response_status",
      });
      t.match(answer.meta.requestId, /^req_/);
      t.same(answer.data, [
        { app_id: "orders", api_id: apiId, response_status: 200, total: 4 },
        { app_id: "orders", api_id: apiId, response_status: 502, total: 1 },
      ]);
    });

    await t.test("refusals are the SDK's typed errors", async (t) => {
      await rejectsWith(
        t,
        analyst.analytics.getRatelimits({ query: "SELECT count() FROM gateway_requests_v1" }),
        BadRequestErrorResponse,
        400,
        "getRatelimits over the gateway's table",
      );
      await rejectsWith(
        t,
        analyst.analytics.getGatewayRequests({ query: "SELECT count() FROM ratelimits_v1" }),
        BadRequestErrorResponse,
        400,
        "getGatewayRequests over the rate limits' table",
      );
      const readApi = client(await h.rootKey(["api.*.read_analytics"], workspace));
      await rejectsWith(
        t,
        readApi.analytics.getRatelimits({ query: "SELECT 1" }),
        ForbiddenErrorResponse,
        403,
        "no ratelimit read_analytics",
      );
      const readRatelimits = client(await h.rootKey(["ratelimit.*.read_analytics"], workspace));
      await rejectsWith(
        t,
        readRatelimits.analytics.getGatewayRequests({ query: "SELECT 1" }),
        ForbiddenErrorResponse,
        403,
        "no api read_analytics",
      );
      await rejectsWith(
        t,
        client("root_unknown").analytics.getRatelimits({ query: "SELECT 1" }),
        UnauthorizedErrorResponse,
        401,
        "an unknown key",
      );
    });

    await t.test("with analytics off both are the SDK's typed 412", async (t) => {
      const off = await sdkApp(t, { storage });
      await rejectsWith(t, off.unkey.analytics.getRatelimits({ query: "SELECT 1" }), PreconditionFailedErrorResponse, 412, "getRatelimits");
      await rejectsWith(
        t,
        off.unkey.analytics.getGatewayRequests({ query: "SELECT 1" }),
        PreconditionFailedErrorResponse,
        412,
        "getGatewayRequests",
      );
    });
  });
}
