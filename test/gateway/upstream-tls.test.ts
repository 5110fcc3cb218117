import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TLSSocket } from "node:tls";
import t from "tap";
import { createKey } from "../helpers/fixtures.js";
import { harness } from "../helpers/harness.js";
import { TLS_FIXTURES } from "../helpers/tls.js";

const API = "api_gateway_upstream_tls";

/** The test CA of test/fixtures/tls, a server certificate it signed for 127.0.0.1 and a client certificate. */
function certificates(): Record<"ca" | "serverCert" | "serverKey" | "clientCert" | "clientKey" | "notPem", string> {
  const file = (name: string) => join(TLS_FIXTURES, name);
  return {
    ca: file("ca.pem"),
    serverCert: file("server-1.pem"),
    serverKey: file("server-1-key.pem"),
    clientCert: file("client.pem"),
    clientKey: file("client-key.pem"),
    notPem: file("not-pem.txt"),
  };
}

t.test("mTLS to an upstream: the pool's client certificate is presented; without it the upstream refuses", async (t) => {
  const files = certificates();
  const upstream: Server = createServer(
    {
      cert: readFileSync(files.serverCert),
      key: readFileSync(files.serverKey),
      ca: readFileSync(files.ca),
      requestCert: true,
      rejectUnauthorized: true,
    },
    (request, response) => {
      const peer = (request.socket as TLSSocket).getPeerCertificate();
      response.end(JSON.stringify({ client: peer.subject?.CN }));
    },
  );
  await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
  t.teardown(() => {
    upstream.closeAllConnections();
    upstream.close();
  });
  const url = `https://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  const h = await harness(t, {
    config: {
      apis: [{ id: API, name: "tls", workspaceId: "ws_test" }],
      routes: [
        {
          name: "mtls",
          match: { prefix: "/mtls" },
          upstream: { targets: [{ url }], tls: { ca: files.ca, cert: files.clientCert, key: files.clientKey } },
          apiId: API,
        },
        { name: "no-cert", match: { prefix: "/no-cert" }, upstream: { targets: [{ url }], tls: { ca: files.ca } }, apiId: API },
      ],
    },
  });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  const { key } = await createKey(h, API);
  const get = async (path: string) => {
    const response = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${key}` } });
    return { status: response.status, body: await response.text() };
  };
  t.same(
    await get("/mtls/x"),
    { status: 200, body: JSON.stringify({ client: "keygate-gateway" }) },
    "the upstream saw keygate's certificate",
  );
  t.equal((await get("/no-cert/x")).status, 502, "without a client certificate the handshake fails: 502");
});

t.test("unreadable or wrong TLS files: a start-up error naming the field and the file", async (t) => {
  const files = certificates();
  const missing = join(tmpdir(), "keygate-no-such-ca.pem");
  const start = (tls: Record<string, string>) =>
    harness(t, {
      config: {
        apis: [{ id: API, name: "tls", workspaceId: "ws_test" }],
        routes: [{ name: "bad", match: { prefix: "/bad" }, upstream: { targets: [{ url: "https://127.0.0.1:1" }], tls }, apiId: API }],
      },
    });
  await t.rejects(start({ ca: missing }), {
    message: new RegExp(`routes\\[0\\]\\.upstream\\.tls\\.ca: '${missing}': cannot be read \\(ENOENT\\)`),
  });
  await t.rejects(start({ ca: files.notPem }), { message: /routes\[0\]\.upstream\.tls\.ca: '.*not-pem\.txt': is not a PEM certificate/ });
  await t.rejects(start({ cert: files.clientCert, key: files.clientCert }), {
    message: /routes\[0\]\.upstream\.tls\.key: '.*client\.pem': is not a PEM private key/,
  });
  await t.rejects(start({ cert: files.clientCert }), { message: /routes\[0\]\.upstream\.tls: cert and key go together/ });
});

t.test("the API refuses a bad pool with a 400 naming each field", async (t) => {
  const h = await harness(t);
  const create = (upstream: unknown) => h.call("keygate.createRoute", { name: "p", match: { prefix: "/p" }, upstream });
  const locations = async (upstream: unknown) => {
    const result = await create(upstream);
    t.equal(result.status, 400);
    return (result.body.error.errors ?? []).map((error: { location: string }) => error.location);
  };
  t.same(
    await locations({ targets: [{ url: "http://a:1/v1" }, { url: "http://b:1/v2" }] }),
    ["body.upstream.targets"],
    "targets with different paths",
  );
  t.same(await locations({ targets: [{ url: "http://a:1" }, { url: "http://a:1" }] }), ["body.upstream.targets"], "a URL twice");
  t.same(
    await locations({ targets: [{ url: "http://a:1" }], tls: { ca: "/no/such/ca.pem" } }),
    ["body.upstream.tls.ca"],
    "a CA file that is not there",
  );
  t.equal((await create({ targets: [] })).status, 400, "no target");
  t.equal((await create({ targets: [{ url: "http://a:1", weight: 0 }] })).status, 400, "a weight of 0");
  t.equal((await create({ targets: [{ url: "http://a:1" }], balance: "random" })).status, 400, "an unknown balance");

  const pool = {
    targets: [{ url: "http://user:secret@a:1" }, { url: "http://b:1", weight: 2 }],
    balance: "least-connections",
    retry: { statuses: [503] },
  };
  const created = await create(pool);
  t.equal(created.status, 200, "a good pool is stored");
  t.same(
    created.body.data.upstream,
    { ...pool, targets: [{ url: "http://user:***@a:1/" }, { url: "http://b:1", weight: 2 }] },
    "shown with the credentials masked",
  );
  const read = await h.call("keygate.getRoute", { route: "p" });
  t.same(
    read.body.data.upstreamHealth.map((target: any) => [target.url, target.healthy, target.weight]),
    [
      ["http://user:***@a:1/", true, 1],
      ["http://b:1/", true, 2],
    ],
    "getRoute shows each target's state, masked",
  );
  const listed = await h.call("keygate.listRoutes", {});
  t.equal(listed.body.data.find((route: any) => route.name === "p").upstreamHealth.length, 2, "listRoutes too");
});
