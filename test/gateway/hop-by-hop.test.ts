import type { AddressInfo } from "node:net";
import t from "tap";
import { createKey } from "../helpers/fixtures.js";
import { harness } from "../helpers/harness.js";
import { headerValues, openConnection, parseResponse, rawRequest, sendUntilClosed } from "../helpers/raw-http.js";
import { HOP_BY_HOP_RESPONSE, startUpstream } from "../helpers/upstream.js";
import { within } from "../helpers/wait.js";

const API = "api_hop_by_hop";

t.test("hop-by-hop headers stop at keygate in both directions (RFC 9110 7.6.1)", async (t) => {
  const upstream = await startUpstream(t);
  const h = await harness(t, {
    config: {
      apis: [{ id: API, name: "hop-by-hop", workspaceId: "ws_test" }],
      routes: [{ name: "svc", match: { prefix: "/svc" }, upstream: upstream.url, apiId: API }],
    },
  });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const port = (h.app.server.address() as AddressInfo).port;
  const { key } = await createKey(h, API);
  /** A GET through keygate on a new connection, answered and closed (`Connection: close` comes first). */
  const get = (path: string, headers: [string, string][]) =>
    sendUntilClosed(
      port,
      rawRequest("GET", path, [
        ["Host", "gateway.test"],
        ["Authorization", `Bearer ${key}`],
        ["Connection", "close"],
        ["X-End-To-End", "kept"],
        ...headers,
      ]),
    );

  await t.test("each hop-by-hop header of the client stops at keygate; the request still reaches the upstream", async (t) => {
    const cases: { name: string; lines: [string, string][] }[] = [
      { name: "keep-alive", lines: [["Keep-Alive", "timeout=1"]] },
      { name: "upgrade", lines: [["Upgrade", "h2c"]] },
      { name: "te", lines: [["TE", "gzip"]] },
      { name: "proxy-authorization", lines: [["Proxy-Authorization", "Basic dXNlcjpwYXNz"]] },
      { name: "proxy-connection", lines: [["Proxy-Connection", "keep-alive"]] },
      { name: "trailer", lines: [["Trailer", "X-Checksum"]] },
      { name: "http2-settings", lines: [["HTTP2-Settings", "AAMAAABkAARAAAAAAAIAAAAA"]] },
      {
        name: "x-client-hop",
        lines: [
          ["Connection", "X-Client-Hop"],
          ["X-Client-Hop", "named by Connection"],
        ],
      },
      {
        name: "x-client-hop-2",
        lines: [
          ["connection", "x-other, X-CLIENT-HOP-2"],
          ["x-client-hop-2", "named by a second Connection line, in other case"],
        ],
      },
    ];
    for (const { name, lines } of cases) {
      const response = await get("/svc/echo-headers", lines);
      t.equal(response.status, 200, `${name}: answered by the upstream`);
      const received = (response.status === 200 ? JSON.parse(response.body).headers : {}) as Record<string, string>;
      t.equal(received[name], undefined, `${name}: not passed on`);
      t.notMatch(received.connection ?? "", /close|x-client-hop|x-other/i, `${name}: the client's Connection is not passed on`);
      t.equal(received["x-end-to-end"], "kept", `${name}: end-to-end headers are`);
    }
  });

  await t.test("TE: trailers may pass, as HTTP/1.1 allows", async (t) => {
    const response = await get("/svc/echo-headers", [["TE", "trailers"]]);
    t.equal(JSON.parse(response.body).headers.te, "trailers");
  });

  await t.test("Expect: 100-continue is met by keygate; the upload then reaches the upstream", async (t) => {
    const connection = await openConnection(port);
    const body = "hello upstream";
    const head = [
      ["Host", "gateway.test"],
      ["Authorization", `Bearer ${key}`],
      ["Connection", "close"],
      ["Content-Length", String(body.length)],
      ["Expect", "100-continue"],
    ] as [string, string][];
    connection.socket.write(rawRequest("POST", "/svc/echo", head));
    await within(
      5_000,
      "100 Continue",
      new Promise<void>((resolve) => connection.socket.on("data", () => connection.received().includes("100 Continue") && resolve())),
    );
    connection.socket.write(body);
    const response = parseResponse(await within(5_000, "the answer", connection.closed));
    t.equal(response.status, 200);
    t.equal(JSON.parse(response.body).length, body.length, "the upstream got the whole body");
  });

  await t.test("the upstream's hop-by-hop headers stop at keygate; its end-to-end headers and body reach the client", async (t) => {
    const response = await get("/svc/hop-by-hop", []);
    t.equal(response.status, 200);
    t.same(JSON.parse(response.body).headers["x-end-to-end"], "kept", "the body arrives whole");
    for (const [name, value] of HOP_BY_HOP_RESPONSE) {
      const seen = headerValues(response, name);
      if (name.toLowerCase() === "x-end-to-end") t.same(seen, [value], "the end-to-end header passes");
      else if (name.toLowerCase() === "connection") t.same(seen, ["close"], "Connection is keygate's own, for the client's connection");
      else t.same(seen, [], `${name} is not passed on`);
    }
  });

  await t.test("a client's Connection: close is honoured: keygate answers, then closes the connection", async (t) => {
    // The upstream answers with Connection: keep-alive; that is about its own connection to keygate, not the client's.
    const response = await get("/svc/anything", []);
    t.equal(response.status, 200);
    t.same(headerValues(response, "connection"), ["close"]);
    t.same(headerValues(response, "keep-alive"), []);
  });
});
