import type { IncomingMessage } from "node:http";
import { http2HasBody, isHttp2 } from "../http/http2.js";

/** A request body read whole, or why it was not: larger than the limit, or the client went away first. */
export type BodyRead = { kind: "read"; body: Buffer } | { kind: "too-large" } | { kind: "gone" };

const TOO_LARGE: BodyRead = { kind: "too-large" };
const GONE: BodyRead = { kind: "gone" };

/**
 * Reads a request's body into one buffer, up to `limit` bytes. A body declared or found larger is not read further
 * (the reading stops there, paused: an answer sent before the rest arrived closes the connection).
 */
export function readBody(raw: IncomingMessage, limit: number): Promise<BodyRead> {
  const declared = raw.headers["content-length"];
  if (declared !== undefined && Number(declared) > limit) return Promise.resolve(TOO_LARGE);
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let length = 0;
    const finish = (result: BodyRead) => {
      raw.off("data", onData);
      raw.off("end", onEnd);
      raw.off("close", onClose);
      raw.off("error", onClose);
      resolve(result);
    };
    const onData = (chunk: Buffer) => {
      length += chunk.length;
      if (length <= limit) return void chunks.push(chunk);
      raw.pause();
      finish(TOO_LARGE);
    };
    const onEnd = () => finish({ kind: "read", body: Buffer.concat(chunks, length) });
    // Closed before its end: the client went away mid-upload.
    const onClose = () => finish(GONE);
    raw.on("data", onData);
    raw.once("end", onEnd);
    raw.once("close", onClose);
    raw.once("error", onClose);
  });
}

/**
 * Whether a request has a body (RFC 9112 §6.3: a length, or a transfer coding; on HTTP/2, a stream not ended with
 * its headers).
 */
export function hasBody(request: IncomingMessage): boolean {
  if (isHttp2(request)) return http2HasBody(request);
  const length = request.headers["content-length"];
  return request.headers["transfer-encoding"] !== undefined || (length !== undefined && length !== "0");
}
