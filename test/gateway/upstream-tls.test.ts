import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TLSSocket } from "node:tls";
import t from "tap";
import { createKey } from "../helpers/fixtures.js";
import { harness } from "../helpers/harness.js";

const API = "api_gateway_upstream_tls";

/** A test CA, a server certificate for 127.0.0.1 and a client certificate it signed, made with the openssl CLI. */
function certificates(
  t: Parameters<typeof harness>[0],
): Record<"ca" | "serverCert" | "serverKey" | "clientCert" | "clientKey" | "notPem", string> {
  const dir = mkdtempSync(join(tmpdir(), "keygate-upstream-tls-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync("openssl", args, { stdio: "ignore" });
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  openssl("req", "-x509", ...ec, "-keyout", file("ca.key"), "-out", file("ca.pem"), "-days", "36500", "-subj", "/CN=keygate test CA");
  for (const [name, subject, extension] of [
    ["server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1"],
    ["client", "/CN=keygate-gateway", "extendedKeyUsage=clientAuth"],
  ] as const) {
    openssl("req", ...ec, "-keyout", file(`${name}.key`), "-out", file(`${name}.csr`), "-subj", subject);
    writeFileSync(file(`${name}.ext`), `${extension}\n`);
    openssl(
      "x509",
      "-req",
      "-in",
      file(`${name}.csr`),
      "-CA",
      file("ca.pem"),
      "-CAkey",
      file("ca.key"),
      "-CAcreateserial",
      "-days",
      "36500",
      "-extfile",
      file(`${name}.ext`),
      "-out",
      file(`${name}.pem`),
    );
  }
  writeFileSync(file("not.pem"), "not a certificate\n");
  return {
    ca: file("ca.pem"),
    serverCert: file("server.pem"),
    serverKey: file("server.key"),
    clientCert: file("client.pem"),
    clientKey: file("client.key"),
    notPem: file("not.pem"),
  };
}

t.test("mTLS to an upstream: the pool's client certificate is presented; without it the upstream refuses", async (t) => {
  const files = certificates(t);
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
  const files = certificates(t);
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
  await t.rejects(start({ ca: files.notPem }), { message: /routes\[0\]\.upstream\.tls\.ca: '.*not\.pem': is not a PEM certificate/ });
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
