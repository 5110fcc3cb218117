import type { Readable } from "node:stream";

/** How much of a body a request's analytics event keeps: its first 8 KiB (docs/gateway.md#analytics). */
export const CAPTURED_BODY_BYTES = 8 * 1024;

/** Ends a captured body that went on beyond CAPTURED_BODY_BYTES. */
export const TRUNCATED_MARKER = "…[truncated]";

/**
 * The first CAPTURED_BODY_BYTES of a body, copied from its chunks as they pass (never the whole body), for the
 * request's analytics event. Made only for a request whose logging policies ask for that body.
 */
export class BodyCapture {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private cut = false;

  /** A body that is whole at hand: one an openapi policy read, an answer keygate wrote itself. */
  static of(body: Buffer | string): BodyCapture {
    const capture = new BodyCapture();
    capture.add(typeof body === "string" ? Buffer.from(body) : body);
    return capture;
  }

  /** Copies what of `chunk` is within the limit; false once the body has gone beyond it: no more is needed. */
  add(chunk: Buffer): boolean {
    if (this.cut) return false;
    const room = CAPTURED_BODY_BYTES - this.size;
    // A copy: the chunk is the stream's, and holding a view would hold all of it.
    if (room > 0 && chunk.length > 0) this.chunks.push(Buffer.from(chunk.subarray(0, room)));
    this.size += Math.min(room, chunk.length);
    this.cut = chunk.length > room;
    return !this.cut;
  }

  /**
   * The body kept, as UTF-8 text (bytes that are not UTF-8 become U+FFFD, a byte order mark is kept), and when it
   * was cut, TRUNCATED_MARKER; a character the cut split is left out rather than shown as U+FFFD.
   */
  text(): string {
    const bytes = Buffer.concat(this.chunks, this.size);
    const text = new TextDecoder("utf-8", { ignoreBOM: true }).decode(bytes, { stream: this.cut });
    return this.cut ? text + TRUNCATED_MARKER : text;
  }
}

/**
 * Captures a request body as it streams to the upstream: one 'data' listener beside undici's, removed once the body
 * has gone beyond the limit. It copies; it neither holds nor changes a chunk, and backpressure stays undici's (it
 * pauses and resumes the body). The body is paused first: a 'data' listener would otherwise set it flowing before
 * undici listens (undici resumes it when it starts writing), and those chunks would never reach the upstream.
 */
export function captureRequestBody(body: Readable): BodyCapture {
  const capture = new BodyCapture();
  body.pause();
  const observe = (chunk: Buffer) => {
    if (!capture.add(chunk)) body.off("data", observe);
  };
  body.on("data", observe);
  return capture;
}
