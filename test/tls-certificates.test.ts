import { copyFileSync, renameSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { TLSSocket } from "node:tls";
import t, { type Test } from "tap";
import { harness } from "./helpers/harness.js";
import { captureLog } from "./helpers/log.js";
import {
  certificateDirectory,
  fixture,
  handshake,
  http2Call,
  http2Session,
  installCertificate,
  SERIAL,
  TLS_FIXTURES,
} from "./helpers/tls.js";
import { waitFor } from "./helpers/wait.js";

/** An app serving TLS from copies of certificate 1 (to rotate), listening; its port, files and log. */
async function tlsApp(t: Test) {
  const files = certificateDirectory(t, 1);
  const log = captureLog();
  const h = await harness(t, {
    log: log.stream,
    config: { server: { tls: { cert: files.cert, key: files.key } }, logging: { level: "info" } },
  });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const port = (h.app.server.address() as AddressInfo).port;
  const certificates = h.app.certificates;
  if (certificates === undefined) throw new Error("no certificates with server.tls");
  return { h, port, files, log, certificates };
}

t.test("a reload gives new connections the new certificate, and connections open before it keep working", async (t) => {
  const { port, files, log, certificates } = await tlsApp(t);
  const before = await http2Session(t, port);
  t.equal((await http2Call(before, "GET", "/v2/liveness")).status, 200);
  t.equal((before.socket as TLSSocket).getPeerCertificate().serialNumber, SERIAL[1]);

  installCertificate(files, 2);
  t.equal(certificates.reload(), true, "the reload (SIGHUP's) took the new files");
  t.equal(certificates.certificate.serialNumber, SERIAL[2]);

  t.equal((await http2Call(before, "GET", "/v2/liveness")).status, 200, "the HTTP/2 connection opened before serves on");
  t.equal((await http2Call(before, "GET", "/v2/liveness")).status, 200);
  t.equal((before.socket as TLSSocket).getPeerCertificate().serialNumber, SERIAL[1], "with the certificate it was opened with");
  t.same(await handshake(port), { protocol: "h2", serial: SERIAL[2] }, "a new connection gets the new certificate");
  const after = await http2Session(t, port);
  t.equal((await http2Call(after, "GET", "/v2/liveness")).status, 200);
  const line = log.lines().find((entry) => entry.msg?.startsWith("TLS certificate reloaded"));
  t.match(line, { level: 30, certificate: { serialNumber: SERIAL[2] } }, "the reload is logged with the new certificate's serial");
});

t.test("files that change on disk are taken up by themselves", async (t) => {
  const { port, files } = await tlsApp(t);
  const before = await http2Session(t, port);
  t.equal((await http2Call(before, "GET", "/v2/liveness")).status, 200);
  installCertificate(files, 2);
  await waitFor("new connections getting certificate 2", 10_000, async () =>
    (await handshake(port)).serial === SERIAL[2] ? true : undefined,
  );
  t.equal((await http2Call(before, "GET", "/v2/liveness")).status, 200, "the connection opened before serves on");

  // As certbot renews: the files replaced by a rename into place.
  copyFileSync(fixture(1).key, join(files.directory, "key.new"));
  copyFileSync(fixture(1).cert, join(files.directory, "cert.new"));
  renameSync(join(files.directory, "key.new"), files.key);
  renameSync(join(files.directory, "cert.new"), files.cert);
  await waitFor("new connections getting certificate 1 again", 10_000, async () =>
    (await handshake(port)).serial === SERIAL[1] ? true : undefined,
  );
  t.pass("a replaced file is seen as a changed one");
});

t.test("files that cannot be used leave the certificate in force, and the problem is logged", async (t) => {
  const { port, files, log, certificates } = await tlsApp(t);
  const errors = () => log.lines().filter((line) => line.level === 50 && line.msg?.startsWith("TLS certificate not reloaded"));

  copyFileSync(fixture(2).key, files.key);
  t.equal(certificates.reload(), false, "a key of another certificate");
  t.match(errors().at(-1)?.problem, `server.tls.key: ${files.key} does not match the certificate in ${files.cert}`);

  writeFileSync(files.cert, "not a certificate\n");
  t.equal(certificates.reload(), false, "a certificate file that is not PEM");
  t.match(errors().at(-1)?.problem, `server.tls.cert: ${files.cert} is not a PEM certificate`);

  writeFileSync(files.cert, "");
  t.equal(certificates.reload(), false, "an empty file (one being written, say)");

  t.same(await handshake(port), { protocol: "h2", serial: SERIAL[1] }, "new connections still get the certificate in force");
  const session = await http2Session(t, port);
  t.equal((await http2Call(session, "GET", "/v2/liveness")).status, 200);

  // The watcher met the same files: it logged them too, and left the certificate as it was.
  await waitFor("the watcher's reloads", 5_000, () => (errors().length > 3 ? true : undefined));
  t.equal(certificates.certificate.serialNumber, SERIAL[1]);
  installCertificate(files, 2);
  await waitFor("the good files taken up", 10_000, async () => ((await handshake(port)).serial === SERIAL[2] ? true : undefined));
});

t.test("server.tls.ca: intermediate certificates are sent after the certificate", async (t) => {
  const withChain = await harness(t, {
    config: { server: { tls: { ...fixture(3), ca: join(TLS_FIXTURES, "intermediate.pem") } } },
  });
  await withChain.app.listen({ port: 0, host: "127.0.0.1" });
  const chained = (withChain.app.server.address() as AddressInfo).port;
  t.same(await handshake(chained), { protocol: "h2", serial: SERIAL[3] }, "a client that trusts only the root CA verifies the chain");

  const without = await harness(t, { config: { server: { tls: fixture(3) } } });
  await without.app.listen({ port: 0, host: "127.0.0.1" });
  const alone = (without.app.server.address() as AddressInfo).port;
  await t.rejects(handshake(alone), { code: "UNABLE_TO_VERIFY_LEAF_SIGNATURE" }, "without it the certificate cannot be verified");
});
