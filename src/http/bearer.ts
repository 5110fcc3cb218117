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
  const token = bearerToken(value);
  if (token === undefined) {
    throw new KeygateError("err:unkey:authentication:malformed", "The Authorization header must have the form 'Bearer <root key>'.");
  }
  return token;
}

/** The token of `Authorization: Bearer <token>`, or undefined when the header is absent or of another form. */
export function bearerToken(header: string | undefined): string | undefined {
  return /^Bearer\s+(\S+)$/i.exec(header?.trim() ?? "")?.[1];
}
