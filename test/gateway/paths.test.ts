import { request } from "node:http";
import type { AddressInfo } from "node:net";
import t from "tap";
import type { ErrorCode } from "../../src/errors/catalogue.js";
import { assertError } from "../helpers/assertions.js";
import { createKey, getKey } from "../helpers/fixtures.js";
import { harness, STORAGE_KINDS } from "../helpers/harness.js";
import { startUpstream } from "../helpers/upstream.js";

const API = "api_gateway_paths";

/** A request with its target sent exactly as written (fetch would resolve dot segments before sending). */
function sendRaw(
  base: string,
  target: string,
  key: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: any }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const outgoing = request(
      { host: hostname, port, method: "GET", path: target, headers: { authorization: `Bearer ${key}`, ...headers } },
      (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("end", () => {
          const text = Buffer.concat(chunks).toString();
          let body: unknown = text;
          try {
            body = JSON.parse(text);
          } catch {
            // not JSON: keep the text
          }
          resolve({ status: response.statusCode ?? 0, headers: response.headers, body });
        });
      },
    );
    outgoing.on("error", reject);
    outgoing.end();
  });
}

for (const storage of STORAGE_KINDS) {
  t.test(`on ${storage} stores, a path with dot segments is refused before anything is charged`, async (t) => {
    const upstream = await startUpstream(t);
    const h = await harness(t, {
      storage,
      config: {
        apis: [{ id: API, name: "paths", workspaceId: "ws_test" }],
        routes: [
          { name: "credits", match: { prefix: "/credits" }, upstream: `${upstream.url}/metered`, apiId: API, credits: { cost: 1 } },
          { name: "admin", match: { prefix: "/admin" }, upstream: `${upstream.url}/admin`, apiId: API, permissions: "admin" },
          { name: "open", match: { prefix: "/" }, upstream: `${upstream.url}/open`, apiId: API },
        ],
      },
    });
    await h.app.listen({ port: 0, host: "127.0.0.1" });
    const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
    const { key, keyId } = await createKey(h, API, { credits: { remaining: 10 } });
    const balance = async () => (await getKey(h, keyId)).credits.remaining as number;

    const refused = [
      "/credits/../x",
      "/credits/../../admin/users",
      "/credits/a/..",
      "/credits/./x",
      "/credits/a/.",
      "/credits/%2e%2e/x",
      "/credits/%2E%2E/x",
      "/credits/.%2E/x",
      "/credits/%2e./x",
      "/credits/%2e/x",
      "/credits/..%2fx",
      "/credits/%2e%2e%2F..%2Fadmin",
      "/credits/..%5cx",
      "/credits/%2e%2e%5C%2e%2e%5Cadmin",
      "/credits\\..\\..\\admin",
      "/credits/..;/admin",
      "/credits/..x",
      "/credits/x../y",
      "/credits/../x?page=1",
    ];
    for (const target of refused) {
      const seenBefore = upstream.seen.length;
      const answer = await sendRaw(base, target, key);
      assertError(t, answer, "err:keygate:gateway:invalid_path", /path/);
      t.equal(upstream.seen.length, seenBefore, `${target}: the upstream is never reached`);
    }
    t.equal(await balance(), 10, "nothing was charged for any of them");

    // Dots inside a segment, encoded slashes and backslashes on their own are no dot segments: such paths are
    // forwarded as they are, under the matched route's upstream path.
    const forwarded = ["/credits/v1..2/x", "/credits/a%2Fb", "/credits/a%5Cb", "/credits/a.b.html"];
    for (const target of forwarded) {
      const answer = await sendRaw(base, target, key);
      t.equal(answer.status, 200, `${target} is forwarded`);
      t.equal(answer.body.url, `/metered${target}`, `${target} reaches the credits route's upstream path as sent`);
    }
    t.equal(await balance(), 10 - forwarded.length, "each forwarded request was charged once");

    // Escaped letters, digits and '-._~' are the same path as unescaped ones (RFC 3986): the route and its price
    // are those of the unescaped path, while the path goes upstream as sent.
    for (const target of ["/cred%69ts/x", "/%63%72%65%64%69%74%73/y"]) {
      const before = await balance();
      const answer = await sendRaw(base, target, key);
      t.equal(answer.status, 200, `${target} is forwarded`);
      t.equal(answer.body.url, `/metered${target}`, `${target} takes the credits route to its upstream path`);
      t.equal(await balance(), before - 1, `${target} pays the credits route's price`);
    }
    t.equal((await sendRaw(base, "/credits%2Fx", key)).body.url, "/open/credits%2Fx", "an escaped slash is no separator: another path");

    // WebSocket upgrades bypass Fastify's router: the same rules hold there, and a path that does not decode is a
    // malformed URL as on a plain request.
    const beforeUpgrades = await balance();
    const upgrades: [string, ErrorCode, RegExp][] = [
      ["/credits/../admin", "err:keygate:gateway:invalid_path", /path/],
      ["/credits/%2e%2e%2fadmin", "err:keygate:gateway:invalid_path", /path/],
      ["/credits/%zz", "err:user:bad_request:malformed_url", /cannot be decoded/],
      ["/credits/%E0%A4%A", "err:user:bad_request:malformed_url", /cannot be decoded/],
    ];
    for (const [target, code, detail] of upgrades) {
      const seenBefore = upstream.seen.length;
      const answer = await sendRaw(base, target, key, {
        connection: "Upgrade",
        upgrade: "websocket",
        "sec-websocket-version": "13",
        "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
      });
      assertError(t, answer, code, detail);
      t.equal(upstream.seen.length, seenBefore, `upgrade to ${target}: the upstream is never reached`);
    }
    t.equal(await balance(), beforeUpgrades, "nor was anything charged for a refused upgrade");

    // The query string is not a path: it goes to the upstream as it came, whatever it holds.
    for (const query of ["next=../admin", "q=%2e%2e%2fadmin", "q=%zz"]) {
      const answer = await sendRaw(base, `/credits/x?${query}`, key);
      t.equal(answer.status, 200, `?${query} is forwarded`);
      t.equal(answer.body.url, `/metered/credits/x?${query}`, `?${query} reaches the upstream unchanged`);
    }
  });
}
