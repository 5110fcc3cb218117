import type { TLSSocket } from "node:tls";
import t from "tap";
import { type RunningServer, startServer } from "../helpers/process.js";
import { REDIS_URL, uniquePrefix } from "../helpers/redis.js";
import { certificateDirectory, handshake, http2Call, http2Session, https11, installCertificate, SERIAL } from "../helpers/tls.js";
import { waitFor } from "../helpers/wait.js";

/** The pids that logged a reload of the certificate with `serial`. */
function reloadedBy(server: RunningServer, serial: string): Set<number> {
  return new Set(
    server
      .logLines()
      .filter(
        (line) =>
          String(line.msg).startsWith("TLS certificate reloaded") &&
          (line.certificate as { serialNumber?: string } | undefined)?.serialNumber === serial,
      )
      .map((line) => line.pid as number),
  );
}

t.test("a keygate process serves HTTPS from KEYGATE_TLS_CERT and KEYGATE_TLS_KEY, and SIGHUP rotates the certificate", async (t) => {
  const files = certificateDirectory(t, 1);
  const server = await startServer(t, { KEYGATE_TLS_CERT: files.cert, KEYGATE_TLS_KEY: files.key, KEYGATE_ANALYTICS_ENGINE: "off" });
  t.match(server.baseUrl, /^https:\/\/127\.0\.0\.1:\d+$/, "it says it listens on https://");
  t.ok(
    server
      .logLines()
      .some((line) => String(line.msg).startsWith("tls: HTTPS with HTTP/2 and HTTP/1.1, certificate CN=localhost, serial 03E9")),
    "the start-up summary names the certificate",
  );
  const port = Number(new URL(server.baseUrl).port);
  const session = await http2Session(t, port);
  t.equal((await http2Call(session, "GET", "/v2/liveness")).status, 200);
  t.equal((await https11(t)(`https://localhost:${port}/v2/liveness`)).status, 200);

  installCertificate(files, 2);
  // Without a configuration file there is no route reload: SIGHUP is for the certificate alone (and does not stop keygate).
  server.child.kill("SIGHUP");
  await waitFor("new connections getting certificate 2", 10_000, async () =>
    (await handshake(port)).serial === SERIAL[2] ? true : undefined,
  );
  t.equal((await http2Call(session, "GET", "/v2/liveness")).status, 200, "the connection opened before serves on");
  t.equal((session.socket as TLSSocket).getPeerCertificate().serialNumber, SERIAL[1]);
  t.equal(server.child.exitCode, null, "still running");
  t.equal(await server.stop(), 0);
});

t.test("with workers, each one serves TLS and reloads its certificate on SIGHUP and when the files change", async (t) => {
  const files = certificateDirectory(t, 1);
  const server = await startServer(
    t,
    {
      KEYGATE_WORKERS: "2",
      REDIS_URL,
      KEYGATE_REDIS_PREFIX: uniquePrefix(t, "tls-workers"),
      KEYGATE_TLS_CERT: files.cert,
      KEYGATE_TLS_KEY: files.key,
      KEYGATE_ANALYTICS_ENGINE: "off",
    },
    30_000,
  );
  t.match(server.baseUrl, /^https:\/\//);
  const port = Number(new URL(server.baseUrl).port);
  const workers = new Set(
    server
      .logLines()
      .filter((line) => line.msg === "worker listening")
      .map((line) => line.pid),
  );
  t.equal(workers.size, 2, "two workers listen");

  const serials = async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 8; i++) seen.add((await handshake(port)).serial);
    return [...seen];
  };
  t.same(await serials(), [SERIAL[1]]);

  installCertificate(files, 2);
  server.child.kill("SIGHUP");
  await waitFor("both workers reloaded certificate 2", 10_000, () => (reloadedBy(server, SERIAL[2]).size === 2 ? true : undefined));
  t.same(await serials(), [SERIAL[2]], "every new connection, whichever worker takes it, gets certificate 2");

  installCertificate(files, 1);
  await waitFor("both workers took up the changed files", 10_000, () => (reloadedBy(server, SERIAL[1]).size === 2 ? true : undefined));
  t.same(await serials(), [SERIAL[1]]);
  t.equal(await server.stop(), 0);
});
