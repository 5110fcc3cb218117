import t from "tap";
import { LogRedaction } from "../../src/lib/log-redaction.js";

const SECRET = "sk_3KjKP25Q2CJyo5chAQgGuU";

/** A pino-like line holding `fields`, redacted, parsed back (so a broken line fails the test). */
function redacted(redaction: LogRedaction, fields: Record<string, unknown>): Record<string, any> {
  const line = `${JSON.stringify({ level: 30, requestId: "req_1", ...fields })}\n`;
  const result = redaction.redact(line);
  t.ok(result.endsWith("}\n"), "still one line");
  return JSON.parse(result);
}

t.test("query parameters that carry keys lose their values, wherever the URL is in the line; other parameters stay", async (t) => {
  const redaction = new LogRedaction([{ kind: "query", parameter: "api_key" }]);
  const url = (value: string) => redacted(redaction, { req: { url: value } }).req.url;
  t.equal(url(`/q/1?page=2&api_key=${SECRET}&sort=asc`), "/q/1?page=2&api_key=[redacted]&sort=asc");
  t.equal(url(`/q/1?api_key=${SECRET}`), "/q/1?api_key=[redacted]");
  t.equal(url(`/q/1?api%5Fkey=${encodeURIComponent(SECRET)}`), "/q/1?api%5Fkey=[redacted]", "a percent-encoded name is the same parameter");
  t.equal(url(`/q/1?API_KEY=${SECRET}`), "/q/1?API_KEY=[redacted]", "names are compared ignoring case");
  t.equal(url(`/q/1?api_key=a&api_key=${SECRET}`), "/q/1?api_key=[redacted]&api_key=[redacted]", "every occurrence");
  t.equal(
    url(`/q/1?api_key=${SECRET}#frag?x=1`),
    "/q/1?api_key=[redacted]",
    "a '#' or '?' does not end the value (URLSearchParams reads it as part of it)",
  );
  t.equal(url(`/q/1?api_key=ab"cd\\ef${SECRET}`), "/q/1?api_key=[redacted]", "characters JSON escapes are part of the value");
  t.equal(url("/q/1?page=2&api_keys=x"), "/q/1?page=2&api_keys=x", "only the named parameter");
  t.equal(url(`/q/1?api_key=`), "/q/1?api_key=[redacted]");

  const message = redacted(redaction, { msg: `could not build http://upstream/q/1?api_key=${SECRET} for the request` }).msg;
  t.equal(message, "could not build http://upstream/q/1?api_key=[redacted] for the request", "in a message, up to the next space");
  const error = redacted(redaction, {
    err: { message: "bad", input: `http://upstream/q?x=1&api_key=${SECRET}`, stack: `Error: bad http://u/?api_key=${SECRET}\n    at x` },
  }).err;
  t.notMatch(JSON.stringify(error), SECRET, "in error fields and stacks");
});

t.test("headers that carry keys lose their values, as JSON fields and as header lines", async (t) => {
  const redaction = new LogRedaction([{ kind: "header", header: "X-Custom-Key" }]);
  const headers = redacted(redaction, {
    headers: { authorization: `Bearer ${SECRET}`, "x-custom-key": SECRET, "X-API-Key": SECRET, accept: "*/*" },
  }).headers;
  t.same(headers, { authorization: "[redacted]", "x-custom-key": "[redacted]", "X-API-Key": "[redacted]", accept: "*/*" });
  t.same(
    redacted(redaction, { headers: { "x-custom-key": [SECRET, "b"] } }).headers,
    { "x-custom-key": "[redacted]" },
    "a repeated header",
  );
  const raw = redacted(redaction, { msg: `GET / HTTP/1.1\r\nhost: a\r\nx-custom-key: ${SECRET}\r\naccept: */*\r\n\r\n` }).msg;
  t.equal(raw, "GET / HTTP/1.1\r\nhost: a\r\nx-custom-key: [redacted]\r\naccept: */*\r\n\r\n", "a header line ends at the line break");
  t.equal(redacted(redaction, { msg: `x-custom-key:${SECRET}` }).msg, "x-custom-key: [redacted]");
});

t.test("credentials after an authentication scheme are removed: Bearer, and each scheme a route names", async (t) => {
  const redaction = new LogRedaction([{ kind: "header", header: "x-auth", scheme: "Token" }]);
  t.equal(
    redacted(redaction, { msg: `sent Authorization: Bearer ${SECRET} twice` }).msg,
    "sent Authorization: [redacted]",
    "as a header line, the whole value",
  );
  t.equal(redacted(redaction, { msg: `rejected bearer\t${SECRET}, sorry` }).msg, "rejected bearer [redacted] sorry");
  t.equal(
    redacted(redaction, { err: { stack: `Error: x-auth was "Token ${SECRET}"` } }).err.stack,
    'Error: x-auth was "Token [redacted]',
    "an escaped quote after it goes too: a credential may contain one",
  );
});

t.test("what is not a credential is left alone", async (t) => {
  const redaction = new LogRedaction([
    { kind: "query", parameter: "token" },
    { kind: "header", header: "authorization", scheme: "Bearer" },
  ]);
  const fields = {
    msg: "answered 403 err:unkey:authorization:insufficient_permissions",
    type: "https://unkey.com/docs/errors/unkey/authorization/forbidden",
    url: "/v2/keys.verifyKey?tokens=1",
    note: "a=b&c=d",
  };
  t.same(redacted(redaction, fields), { level: 30, requestId: "req_1", ...fields });
});

t.test("locations learnt later are added; none is forgotten", async (t) => {
  const redaction = new LogRedaction([{ kind: "query", parameter: "old_key" }]);
  redaction.learn([
    { kind: "query", parameter: "new_key" },
    { kind: "header", header: "x-new" },
  ]);
  const line = redacted(redaction, { url: `/a?old_key=${SECRET}&new_key=${SECRET}`, headers: { "x-new": SECRET } });
  t.equal(line.url, "/a?old_key=[redacted]&new_key=[redacted]");
  t.same(line.headers, { "x-new": "[redacted]" });
});
