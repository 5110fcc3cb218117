import { KeygateError } from "../errors/keygate-error.js";

/**
 * The root key from `Authorization: Bearer <key>`. Surrounding whitespace is ignored and the scheme is matched
 * case-insensitively (RFC 7235). Missing and malformed headers are 401s with their own codes.
 */
export function parseBearer(header: string | undefined): string {
  const value = header?.trim() ?? "";
  if (value === "") {
    throw new KeygateError(
      "err:unkey:authentication:missing",
      "The request has no Authorization header. Send 'Authorization: Bearer <root key>'.",
    );
  }
  const match = /^Bearer\s+(\S+)$/i.exec(value);
  if (!match) {
    throw new KeygateError("err:unkey:authentication:malformed", "The Authorization header must have the form 'Bearer <root key>'.");
  }
  return match[1] as string;
}
