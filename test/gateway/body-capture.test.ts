import { PassThrough } from "node:stream";
import t from "tap";
import { BodyCapture, CAPTURED_BODY_BYTES, captureRequestBody, TRUNCATED_MARKER } from "../../src/gateway/body-capture.js";

const captured = (...chunks: (Buffer | string)[]) => {
  const capture = new BodyCapture();
  for (const chunk of chunks) capture.add(Buffer.from(chunk));
  return capture.text();
};

t.test("a body up to the limit is kept whole; one byte more is cut there and marked", async (t) => {
  t.equal(CAPTURED_BODY_BYTES, 8 * 1024);
  t.equal(captured(), "", "no body");
  t.equal(captured('{"a":', "1}"), '{"a":1}', "chunks joined");
  const limit = "x".repeat(CAPTURED_BODY_BYTES);
  t.equal(captured(limit), limit, "exactly the limit: whole, no marker");
  t.equal(captured(limit, ""), limit, "an empty chunk after it changes nothing");
  t.equal(captured(limit, "y"), `${limit}${TRUNCATED_MARKER}`, "one byte more: cut, marked");
  t.equal(captured("x".repeat(20 * 1024)), `${limit}${TRUNCATED_MARKER}`, "one large chunk");
  const pieces = Array.from({ length: 100 }, (_, n) => String(n % 10).repeat(300));
  t.equal(captured(...pieces), `${pieces.join("").slice(0, CAPTURED_BODY_BYTES)}${TRUNCATED_MARKER}`, "many chunks across the limit");
});

t.test("text is UTF-8: invalid bytes become U+FFFD, a character the cut splits is left out", async (t) => {
  t.equal(captured("ünïcødé 🔑"), "ünïcødé 🔑");
  t.equal(captured(Buffer.from([0x66, 0xff, 0x6f, 0xc3])), "f\uFFFDo\uFFFD", "not UTF-8, and a sequence the body itself ends in");
  t.equal(captured("\uFEFFbom"), "\uFEFFbom", "a byte order mark is kept, as sent");
  const split = `${"a".repeat(CAPTURED_BODY_BYTES - 1)}€ and more`;
  t.equal(captured(split), `${"a".repeat(CAPTURED_BODY_BYTES - 1)}${TRUNCATED_MARKER}`, "€ is 3 bytes, 1 of them within the limit");
  const whole = `${"a".repeat(CAPTURED_BODY_BYTES - 3)}€ and more`;
  t.equal(captured(whole), `${"a".repeat(CAPTURED_BODY_BYTES - 3)}€${TRUNCATED_MARKER}`, "a character that ends at the limit stays");
});

t.test("a capture copies: the chunks it saw may change afterwards", async (t) => {
  const capture = new BodyCapture();
  const chunk = Buffer.from("original");
  capture.add(chunk);
  chunk.fill(0);
  t.equal(capture.text(), "original");
  t.equal(BodyCapture.of('{"error":1}').text(), '{"error":1}', "a body at hand");
});

t.test("a request body's capture leaves the stream to its reader and stops listening past the limit", async (t) => {
  const body = new PassThrough();
  body.write("early ");
  const capture = captureRequestBody(body);
  t.equal(body.readableFlowing, false, "paused: nothing flows until the reader listens and resumes it");
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(body.readableFlowing, false, "still paused a turn later: the chunk written before waits for the reader");
  const read: Buffer[] = [];
  body.on("data", (chunk: Buffer) => read.push(chunk));
  body.resume();
  body.write("x".repeat(CAPTURED_BODY_BYTES));
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(body.listenerCount("data"), 1, "the capture's listener is gone once the body passed the limit");
  body.end(" late");
  await new Promise((resolve) => body.once("end", resolve));
  t.equal(Buffer.concat(read).toString(), `early ${"x".repeat(CAPTURED_BODY_BYTES)} late`, "the reader got every byte");
  t.equal(capture.text(), `early ${"x".repeat(CAPTURED_BODY_BYTES - 6)}${TRUNCATED_MARKER}`);
});
