import type { AddressInfo } from "node:net";
import { type ConnectionOptions, connect } from "node:tls";
import t, { type Test } from "tap";
import { readTlsFiles } from "../src/config/tls-files.js";
import { problemsOf } from "./helpers/config.js";
import { harness } from "./helpers/harness.js";
import { fixture, TEST_CA } from "./helpers/tls.js";

// server.tls offers AEAD suites only by default (Mozilla's "intermediate" profile): a client that offers only a CBC
// suite is refused, one offering an AEAD suite (TLS 1.2 or 1.3) is served. server.tls.ciphers changes the list.

/** A keygate serving TLS with the fixtures' certificate 1 (ECDSA), `ciphers` when given; its port. */
async function tlsPort(t: Test, ciphers?: string): Promise<{ port: number; reload: () => boolean }> {
  const h = await harness(t, { config: { server: { tls: { ...fixture(1), ...(ciphers ? { ciphers } : {}) } } } });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  return { port: (h.app.server.address() as AddressInfo).port, reload: () => h.app.certificates?.reload() ?? false };
}

/** The suite and version a handshake offering `options` agreed on, or the error that ended it. */
function handshake(port: number, options: ConnectionOptions): Promise<{ cipher: string; version: string } | { refused: string }> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port, servername: "localhost", ca: TEST_CA, ...options }, () => {
      const cipher = socket.getCipher();
      socket.end();
      resolve({ cipher: cipher.standardName, version: socket.getProtocol() ?? "" });
    });
    socket.once("error", (error: NodeJS.ErrnoException) => resolve({ refused: error.code ?? error.message }));
  });
}

const CBC = { maxVersion: "TLSv1.2", ciphers: "ECDHE-ECDSA-AES128-SHA256" } as const;
const GCM = { maxVersion: "TLSv1.2", ciphers: "ECDHE-ECDSA-AES128-GCM-SHA256" } as const;

t.test("by default a CBC suite is refused and AEAD suites are served, TLS 1.2 and 1.3", async (t) => {
  const { port, reload } = await tlsPort(t);
  t.match(await handshake(port, CBC), { refused: /SSL|HANDSHAKE|ECONNRESET/ }, "a client offering only ECDHE-ECDSA-AES128-SHA256 (CBC)");
  t.same(await handshake(port, GCM), { cipher: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", version: "TLSv1.2" });
  const chacha = await handshake(port, { maxVersion: "TLSv1.2", ciphers: "ECDHE-ECDSA-CHACHA20-POLY1305" });
  t.same(chacha, { cipher: "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", version: "TLSv1.2" });
  t.match(await handshake(port, { minVersion: "TLSv1.3" }), {
    cipher: /^TLS_(AES_128_GCM|AES_256_GCM|CHACHA20_POLY1305)_SHA/,
    version: "TLSv1.3",
  });
  t.match(
    await handshake(port, { maxVersion: "TLSv1.1", minVersion: "TLSv1" }),
    { refused: /SSL|PROTOCOL|VERSION|ECONNRESET/ },
    "TLS 1.1 is refused",
  );
  t.equal(reload(), true, "a reload of the certificate (SIGHUP)...");
  t.match(await handshake(port, CBC), { refused: /SSL|HANDSHAKE|ECONNRESET/ }, "...keeps the suites: CBC still refused");
  t.same(await handshake(port, GCM), { cipher: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", version: "TLSv1.2" });
});

t.test("server.tls.ciphers replaces the list", async (t) => {
  const { port } = await tlsPort(t, "ECDHE-ECDSA-AES128-SHA256:TLS_AES_128_GCM_SHA256");
  t.same(
    await handshake(port, CBC),
    { cipher: "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", version: "TLSv1.2" },
    "the CBC suite it names is served",
  );
  t.match(await handshake(port, GCM), { refused: /SSL|HANDSHAKE|ECONNRESET/ }, "a suite it leaves out is not");
  t.same(await handshake(port, {}), { cipher: "TLS_AES_128_GCM_SHA256", version: "TLSv1.3" });
});

t.test("a cipher list OpenSSL cannot use stops the configuration, naming server.tls.ciphers", async (t) => {
  t.match(
    problemsOf(() => readTlsFiles({ ...fixture(1), ciphers: "NOT-A-SUITE" })),
    [/^server\.tls\.ciphers: 'NOT-A-SUITE' names no cipher suite OpenSSL offers/],
  );
});
